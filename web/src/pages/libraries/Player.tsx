import { useEffect, useRef, useState } from "react";
import type { Player } from "./types.ts";

type Theme = Player["theme"];

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
          if (data.fatal) setError(`The video cannot be played (${data.details}).`);
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
