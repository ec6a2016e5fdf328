import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { Config } from "../config.ts";
import { ApiError } from "../http/errors.ts";
import { IdParams, mediaErrorResponses, TextResponse, Uuid } from "../http/schemas.ts";
import type { MediaServices } from "../media/index.ts";
import { DEFAULT_THEME } from "../media/player-service.ts";
import type { Theme } from "../media/schemas.ts";
import { videoAssetUrl } from "../media/urls.ts";
import { readJson } from "../store/codec.ts";
import { viewerOf } from "./access.ts";
import type { VideoServices } from "./index.ts";
import { MASTER_PLAYLIST, MP4_FILE } from "./transcoder.ts";

export interface EmbedRouteOptions {
  media: MediaServices;
  video: VideoServices;
  config: Config;
}

export const HLS_SCRIPT_PATH = "/embed/assets/hls.min.js";

const COLOR = /^#(?:[0-9a-f]{3}|[0-9a-f]{6})$/i;
const color = (value: unknown, fallback: string) =>
  typeof value === "string" && COLOR.test(value) ? value : fallback;

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c,
  );

/** JSON safe inside a <script> element. */
const scriptJson = (value: unknown) =>
  JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");

export function embedPage(input: {
  title: string;
  manifestUrl: string;
  mp4Url: string;
  posterUrl: string;
  theme: Theme;
}): string {
  const theme = { ...DEFAULT_THEME, ...input.theme };
  const controls = Array.isArray(theme.controls) ? theme.controls : [];
  const controlsList = [
    controls.includes("fullscreen") ? "" : "nofullscreen",
    controls.includes("settings") ? "" : "noplaybackrate",
    "nodownload",
  ]
    .filter(Boolean)
    .join(" ");
  const attributes = [
    controls.length > 0 ? "controls" : "",
    `controlslist="${controlsList}"`,
    theme.autoplay ? "autoplay muted" : "",
    theme.loop ? "loop" : "",
    "playsinline",
    input.posterUrl ? `poster="${escapeHtml(input.posterUrl)}"` : "",
  ]
    .filter(Boolean)
    .join(" ");
  const primary = color(theme.primary_color, DEFAULT_THEME.primary_color);
  const background = color(theme.background_color, DEFAULT_THEME.background_color);
  const text = color(theme.text_color, DEFAULT_THEME.text_color);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(input.title)}</title>
<style>
  html, body { margin: 0; height: 100%; background: ${background}; color: ${text}; font-family: system-ui, sans-serif; }
  .player { position: relative; width: 100%; height: 100%; display: flex; align-items: center; justify-content: center; }
  video { width: 100%; height: 100%; background: ${background}; accent-color: ${primary}; }
  .error { position: absolute; bottom: 1rem; left: 1rem; color: ${text}; }
  .audio { position: absolute; top: 0.5rem; right: 0.5rem; max-width: min(16rem, 50%); text-overflow: ellipsis; font: inherit; font-size: 0.875rem; padding: 0.25rem; border-radius: 0.25rem; color: ${text}; background: ${background}; border: 1px solid ${primary}; opacity: 0.85; }
</style>
</head>
<body>
<div class="player" data-primary-color="${primary}" data-controls="${escapeHtml(controls.join(","))}">
<video id="cumulo-video" ${attributes}></video>
<p class="error" id="cumulo-error" hidden></p>
<select class="audio" id="cumulo-audio" aria-label="Audio track" hidden></select>
</div>
<script src="${HLS_SCRIPT_PATH}"></script>
<script>
(function () {
  var config = ${scriptJson({ manifest: input.manifestUrl, mp4: input.mp4Url, captions: controls.includes("captions"), controls: controls.length > 0 })};
  var video = document.getElementById("cumulo-video");
  var error = document.getElementById("cumulo-error");
  var audio = document.getElementById("cumulo-audio");
  function fail(message) { error.textContent = message; error.hidden = false; }
  if (window.Hls && window.Hls.isSupported()) {
    var hls = new window.Hls({ subtitleDisplay: config.captions });
    hls.on(window.Hls.Events.ERROR, function (_event, data) {
      if (data.fatal) { hls.destroy(); audio.hidden = true; video.src = config.mp4; }
    });
    // A video with several audio tracks (languages, commentary): the viewer picks one.
    hls.on(window.Hls.Events.AUDIO_TRACKS_UPDATED, function (_event, data) {
      audio.replaceChildren();
      data.audioTracks.forEach(function (track, index) {
        var option = document.createElement("option");
        option.value = String(index);
        option.textContent = track.name;
        audio.appendChild(option);
      });
      audio.value = String(Math.max(hls.audioTrack, 0));
      audio.hidden = !config.controls || data.audioTracks.length < 2;
    });
    hls.on(window.Hls.Events.AUDIO_TRACK_SWITCHING, function (_event, data) { audio.value = String(data.id); });
    audio.addEventListener("change", function () { hls.audioTrack = Number(audio.value); });
    hls.loadSource(config.manifest);
    hls.attachMedia(video);
  } else if (video.canPlayType("application/vnd.apple.mpegurl")) {
    video.src = config.manifest;
  } else {
    video.src = config.mp4;
  }
  video.addEventListener("error", function () { fail("This video cannot be played."); });
})();
</script>
</body>
</html>
`;
}

/**
 * `GET /embed/{libraryId}/{videoId}?player=`: an HTML page playing a ready video with a player theme,
 * under the same access rules as the edge; the HLS library is served by Cumulo itself.
 */
export const embedRoutes: FastifyPluginAsyncTypebox<EmbedRouteOptions> = async (app, { video, config }) => {
  const hlsFile = createRequire(import.meta.url).resolve("hls.js/dist/hls.min.js");
  let hlsScript: string | undefined;

  app.get(
    HLS_SCRIPT_PATH,
    {
      schema: {
        operationId: "getEmbedPlayerScript",
        tags: ["media: embed"],
        summary: "The HLS player script used by embed pages (hls.js)",
        response: { ...mediaErrorResponses, 200: TextResponse("text/javascript", "hls.js, minified") },
      },
      config: { rateLimit: false },
    },
    async (_request, reply) => {
      hlsScript ??= await readFile(hlsFile, "utf8");
      return reply
        .header("content-type", "text/javascript; charset=utf-8")
        .header("cache-control", "public, max-age=86400")
        .send(hlsScript);
    },
  );

  app.get(
    "/embed/:libraryId/:videoId",
    {
      schema: {
        operationId: "getEmbedPage",
        tags: ["media: embed"],
        summary: "HTML page playing a video with a player (no authentication; playback rules apply)",
        description:
          "`player` picks one of the library's players (else its default player, else the default theme). Referrer, country and private-video rules apply as on the edge: a private video needs `token` and `expires` (from the playback-token operation), which the page passes on to the stream. An unknown library, video or player, or a video that is not ready, is 404; a refused viewer 403.",
        params: IdParams("libraryId", "videoId"),
        querystring: Type.Object({
          player: Type.Optional(Uuid),
          token: Type.Optional(Type.String({ maxLength: 200 })),
          expires: Type.Optional(Type.String({ maxLength: 20 })),
        }),
        response: { ...mediaErrorResponses, 200: TextResponse("text/html", "The player page") },
      },
    },
    async (request, reply) => {
      const { libraryId, videoId } = request.params;
      const query = new URLSearchParams();
      if (request.query.token !== undefined) query.set("token", request.query.token);
      if (request.query.expires !== undefined) query.set("expires", request.query.expires);
      const access = await video.access.admit(
        libraryId,
        videoId,
        viewerOf(request.headers, query, video.countries.of(request.raw)),
      );
      switch (access.outcome) {
        case "not_found":
          throw ApiError.notFound();
        case "refused":
          throw ApiError.forbidden(access.message);
        case "admitted":
          break;
      }
      const found = access.video;
      if (found.status !== "ready") throw ApiError.notFound();
      const player = await video.access.player(libraryId, request.query.player);
      if (request.query.player && !player) throw ApiError.notFound();
      const theme = (player ? readJson<Theme>(player.theme) : undefined) ?? DEFAULT_THEME;
      const suffix = access.token ? `?${new URLSearchParams({ ...access.token }).toString()}` : "";
      const html = embedPage({
        title: found.title,
        manifestUrl: `${videoAssetUrl(config, libraryId, found.id, MASTER_PLAYLIST)}${suffix}`,
        mp4Url: `${videoAssetUrl(config, libraryId, found.id, MP4_FILE)}${suffix}`,
        posterUrl: found.thumbnail_url ? `${found.thumbnail_url}${suffix}` : "",
        theme,
      });
      return reply
        .header("content-type", "text/html; charset=utf-8")
        .header("cache-control", "private, no-store")
        .header("referrer-policy", "strict-origin-when-cross-origin")
        .send(html);
    },
  );
};
