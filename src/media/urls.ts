import type { Config } from "../config.ts";

const DEFAULT_EDGE_PORT = 8081;

/** The host name of a library's own distribution (as the CDN service creates it). */
export const libraryHostname = (config: Config, libraryId: string): string =>
  `${libraryId}.${config.mediaDomain}`;

/**
 * Base URL of a distribution as viewers reach it: path-style `{edge public url}/{hostname}` by
 * default, host-style `http://{hostname}` when `CUMULO_EDGE_URL_STYLE=host`.
 */
export function distributionBaseUrl(config: Config, hostname: string): string {
  if (config.edgeUrlStyle === "host") return `http://${hostname}`;
  const edgePort = config.edgePort === "off" || config.edgePort === 0 ? DEFAULT_EDGE_PORT : config.edgePort;
  const host = config.host.includes(":") ? `[${config.host}]` : config.host;
  const base = config.edgePublicUrl ?? `http://${host}:${edgePort}`;
  return `${base}/${hostname}`;
}

/** Absolute URL of one file of a video on its library's distribution, e.g. `thumbnail.jpg`. */
export const videoAssetUrl = (config: Config, libraryId: string, videoId: string, file: string): string =>
  `${distributionBaseUrl(config, libraryHostname(config, libraryId))}/${videoId}/${file}`;

/** Blob key prefix holding every file of a library, and of one of its videos. */
export const libraryBlobPrefix = (libraryId: string): string => `media/${libraryId}`;
export const videoBlobPrefix = (libraryId: string, videoId: string): string =>
  `media/${libraryId}/${videoId}`;
