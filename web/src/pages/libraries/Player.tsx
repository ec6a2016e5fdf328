import { useEffect, useRef, useState } from "react";
import type { Player } from "./types.ts";

type Theme = Player["theme"];

/** Why the edge may refuse the console's own page, said wherever it does. */
export const WHO_MAY_PLAY = `The library's security settings (referrers, countries, video privacy) decide which pages and viewers may play its videos; to preview them here under a referrer allow list, list this console's host (${window.location.hostname}).`;

/** The edge's refusal (403 `{message}`, readable across origins), for the console to show. */
function refusalOf(networkDetails: unknown): string {
  try {
    const text = (networkDetails as { responseText?: unknown } | undefined)?.responseText;
    const message = JSON.parse(String(text)).message;
    if (typeof message === "string" && message !== "") return `${message}. `;
  } catch {
    // not the edge's JSON
  }
  return "";
}

/**
 * The video as viewers see it: HLS through hls.js (native HLS where the browser has it), in the
 * colours and with the autoplay and loop settings of a player.
 */
export function HlsPlayer({
  manifestUrl,
  theme,
  title,
}: {
  manifestUrl: string;
  theme?: Theme;
  title: string;
}) {
  const video = useRef<HTMLVideoElement>(null);
  const [error, setError] = useState<string>();
  useEffect(() => {
    const element = video.current;
    if (!element) return;
    let destroy = () => {};
    let cancelled = false;
    setError(undefined);
    import("hls.js").then(({ default: Hls }) => {
      if (cancelled) return;
      if (Hls.isSupported()) {
        const hls = new Hls();
        hls.on(Hls.Events.ERROR, (_event, data) => {
          if (!data.fatal) return;
          setError(
            data.response?.code === 403
              ? `The edge refused to play this video on this page: ${refusalOf(data.networkDetails)}${WHO_MAY_PLAY}`
              : `The video cannot be played (${data.details}).`,
          );
        });
        hls.loadSource(manifestUrl);
        hls.attachMedia(element);
        destroy = () => hls.destroy();
      } else if (element.canPlayType("application/vnd.apple.mpegurl")) {
        element.src = manifestUrl;
      } else {
        setError("This browser cannot play HLS video.");
      }
    });
    return () => {
      cancelled = true;
      destroy();
    };
  }, [manifestUrl]);
  return (
    <figure
      className="player"
      style={{
        background: theme?.background_color,
        color: theme?.text_color,
        borderColor: theme?.primary_color,
      }}
    >
      <video
        ref={video}
        controls
        playsInline
        muted={theme?.autoplay ?? false}
        autoPlay={theme?.autoplay ?? false}
        loop={theme?.loop ?? false}
        aria-label={`Video: ${title}`}
        style={{ accentColor: theme?.primary_color }}
      />
      {error && (
        <figcaption className="field-error" role="alert">
          {error}
        </figcaption>
      )}
    </figure>
  );
}
