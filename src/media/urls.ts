import type { Config } from "../config.ts";
import { MASTER_PLAYLIST, MP4_FILE, PREVIEW_FILE, THUMBNAIL_FILE } from "../video/transcoder.ts";
import type { VideoRow } from "./tables.ts";

const DEFAULT_EDGE_PORT = 8081;

/** The host name of a library's own distribution (as the CDN service creates it). */
export const libraryHostname = (config: Config, libraryId: string): string =>
  `${libraryId}.${config.mediaDomain}`;

/**
 * Base URL of a distribution as viewers reach it: path-style `{edge public url}/{hostname}` by
 * default, host-style `http://{hostname}` when `CUMULO_EDGE_URL_STYLE=host` (`https://` when the
 * edge's public URL is https).
 */
export function distributionBaseUrl(config: Config, hostname: string): string {
  if (config.edgeUrlStyle === "host") {
    const scheme = config.edgePublicUrl?.startsWith("https:") ? "https" : "http";
    return `${scheme}://${hostname}`;
  }
  const edgePort = config.edgePort === "off" || config.edgePort === 0 ? DEFAULT_EDGE_PORT : config.edgePort;
  const host = config.host.includes(":") ? `[${config.host}]` : config.host;
  const base = config.edgePublicUrl ?? `http://${host}:${edgePort}`;
  return `${base}/${hostname}`;
}

/** Absolute URL of one file of a video on its library's distribution, e.g. `thumbnail.jpg`. */
export const videoAssetUrl = (config: Config, libraryId: string, videoId: string, file: string): string =>
  `${distributionBaseUrl(config, libraryHostname(config, libraryId))}/${videoId}/${file}`;

type PlaybackUrlFields =
  | "manifest_url"
  | "direct_play_url"
  | "thumbnail_url"
  | "preview_animation_thumbnail_url";

/**
 * A video's playback URLs as this configuration serves them, each "" while the video has no such
 * file (its stored URL is ""): built when shown, so a changed edge URL or URL style applies to
 * videos processed before the change.
 */
export function playbackUrls(
  config: Config,
  video: Pick<VideoRow, "id" | "library_id" | PlaybackUrlFields>,
): Pick<VideoRow, PlaybackUrlFields> {
  const url = (stored: string, file: string) =>
    stored === "" ? "" : videoAssetUrl(config, video.library_id, video.id, file);
  return {
    manifest_url: url(video.manifest_url, MASTER_PLAYLIST),
    direct_play_url: url(video.direct_play_url, MP4_FILE),
    thumbnail_url: url(video.thumbnail_url, THUMBNAIL_FILE),
    preview_animation_thumbnail_url: url(video.preview_animation_thumbnail_url, PREVIEW_FILE),
  };
}

/** Where every media file lives in the blob store. */
export const MEDIA_PREFIX = "media";
/** Blob key prefix holding every file of a library, and of one of its videos. */
export const libraryBlobPrefix = (libraryId: string): string => `${MEDIA_PREFIX}/${libraryId}`;
export const videoBlobPrefix = (libraryId: string, videoId: string): string =>
  `${libraryBlobPrefix(libraryId)}/${videoId}`;
