import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { FastifyBaseLogger } from "fastify";
import { LRUCache } from "lru-cache";
import type { BlobStore } from "../blobs/store.ts";
import { sentByCumuloEdge } from "../cdn/edge/http.ts";
import type { MediaOrigin } from "../cdn/edge/media-origin.ts";
import { sendJsonError, streamRepresentation } from "../cdn/edge/serving.ts";
import { isUuid } from "../ids.ts";
import type { LibraryRow } from "../media/tables.ts";
import { readJson } from "../store/codec.ts";
import { type PlaybackAccess, type ViewerToken, viewerOf } from "./access.ts";
import { renditionPrefix } from "./pipeline.ts";
import {
  MUXER_START_PTS,
  srtToVtt,
  subtitlePlaylist,
  withQuery,
  withSubtitleTracks,
  withTimestampMap,
} from "./playlists.ts";
import { MASTER_PLAYLIST, MP4_FILE, PREVIEW_FILE, THUMBNAIL_DIR, THUMBNAIL_FILE } from "./transcoder.ts";
import type { ViewerCountries } from "./viewer-countries.ts";

/** Files a video has on its distribution, relative to `/{video_id}/`. */
type Asset =
  | { kind: "master" }
  | { kind: "media-playlist"; file: string }
  | { kind: "file"; file: string; type: string }
  | { kind: "thumbnail" }
  | { kind: "subtitle-playlist"; subtitleId: string }
  | { kind: "subtitle"; subtitleId: string };

function assetOf(path: string): Asset | undefined {
  if (path === MASTER_PLAYLIST) return { kind: "master" };
  if (path === MP4_FILE) return { kind: "file", file: path, type: "video/mp4" };
  if (path === PREVIEW_FILE) return { kind: "file", file: path, type: "image/webp" };
  if (path === THUMBNAIL_FILE) return { kind: "thumbnail" };
  if (new RegExp(`^${THUMBNAIL_DIR}/thumbnail_\\d{3}\\.jpg$`).test(path))
    return { kind: "file", file: path, type: "image/jpeg" };
  // A rung is named by its height: 2p for a 2-pixel-high source (the ladder's own rungs are 240p up).
  if (/^\d{1,4}p\/index\.m3u8$/.test(path)) return { kind: "media-playlist", file: path };
  if (/^\d{1,4}p\/segment_\d{3,6}\.ts$/.test(path)) return { kind: "file", file: path, type: "video/mp2t" };
  // An audio track other than the rungs' own, by its stream in the source (`audio_2`).
  if (/^audio_\d{1,3}\/index\.m3u8$/.test(path)) return { kind: "media-playlist", file: path };
  if (/^audio_\d{1,3}\/segment_\d{3,6}\.ts$/.test(path))
    return { kind: "file", file: path, type: "video/mp2t" };
  const subtitle = /^subtitles\/([0-9a-f-]{36})\.(m3u8|vtt)$/i.exec(path);
  if (subtitle?.[1] && isUuid(subtitle[1])) {
    return subtitle[2] === "m3u8"
      ? { kind: "subtitle-playlist", subtitleId: subtitle[1].toLowerCase() }
      : { kind: "subtitle", subtitleId: subtitle[1].toLowerCase() };
  }
  return undefined;
}

const PLAYLIST_TYPE = "application/vnd.apple.mpegurl";
/** The refusal of a request another distribution's edge made for its viewer. */
export const THROUGH_ANOTHER_DISTRIBUTION =
  "A library's videos are served to viewers directly, not as another distribution's origin";
/**
 * On every answer the store makes: never kept by the edge, so always fresh from the store, readable
 * by players on other origins (a script player reading a range's `Content-Range` or the `ETag` too),
 * and never sniffed by browsers as another type than the one sent (an
 * uploaded thumbnail is checked by its magic bytes only: a GIF that is SVG after `GIF89a` is served
 * as `image/gif`).
 */
const FROM_THE_STORE: OutgoingHttpHeaders = {
  age: "0",
  "x-cache": "MISS",
  "access-control-allow-origin": "*",
  "access-control-expose-headers": "Content-Range, Accept-Ranges, ETag, Last-Modified, Age, X-Cache",
  "x-content-type-options": "nosniff",
};

/** Whether responses may be kept by shared caches downstream: only when no rule limits who may see them. */
function isRestricted(library: LibraryRow): boolean {
  if (library.video_privacy === "private") return true;
  for (const json of [library.whitelist_referrers, library.blocked_countries]) {
    const rule = readJson<{ enabled?: boolean }>(json);
    if (rule && rule.enabled !== false) return true;
  }
  return false;
}

/** Memory for subtitles kept as served (UTF-16 in V8: two bytes a character counted). */
const SUBTITLES_KEPT_BYTES = 64 * 1024 * 1024;

/**
 * Serves `media://{library_id}` distributions from Cumulo's blob store, enforcing the library's
 * security settings on every request. Nothing it answers is stored in the edge cache, so a refused
 * viewer can never be served a copy another viewer was allowed to see.
 */
export class VideoMediaOrigin implements MediaOrigin {
  /**
   * Subtitles as served, by file: a 5 MiB SRT took 0.3-0.6 s of the event loop to read and convert,
   * on every viewer's request (QA of 6 December). A subtitle's file is never rewritten (a new file
   * gets a new key), so a kept text cannot go stale.
   */
  readonly #subtitles = new LRUCache<string, string>({
    maxSize: SUBTITLES_KEPT_BYTES,
    sizeCalculation: (text) => text.length * 2,
  });

  constructor(
    private readonly playback: PlaybackAccess,
    private readonly countries: ViewerCountries,
    private readonly blobs: BlobStore,
    private readonly logger: FastifyBaseLogger,
  ) {}

  async serve(
    request: IncomingMessage,
    response: ServerResponse,
    libraryId: string,
    pathAndQuery: string,
  ): Promise<number> {
    const queryAt = pathAndQuery.indexOf("?");
    const rawPath = queryAt === -1 ? pathAndQuery : pathAndQuery.slice(0, queryAt);
    const query = new URLSearchParams(queryAt === -1 ? "" : pathAndQuery.slice(queryAt + 1));
    const match = /^\/([^/]+)\/(.+)$/.exec(rawPath);
    const videoId = match?.[1]?.toLowerCase();
    const asset = match?.[2] ? assetOf(match[2]) : undefined;
    if (!videoId || !isUuid(videoId) || !asset || !isUuid(libraryId)) return this.#error(response, 404);
    // Another distribution's origin request (an organization named this edge as its origin): the
    // viewer's country and address stay with the first edge, so the library's rules would see the
    // edge's own instead, and a denied country would pass.
    if (sentByCumuloEdge(request.headers)) return this.#error(response, 403, THROUGH_ANOTHER_DISTRIBUTION);

    const access = await this.playback.admit(
      libraryId,
      videoId,
      viewerOf(request.headers, query, this.countries.of(request)),
    );
    if (access.outcome === "not_found") return this.#error(response, 404);
    if (access.outcome === "refused") return this.#error(response, 403, access.message);
    const { library, video } = access;
    const cacheControl = isRestricted(library) ? "private, max-age=300" : "public, max-age=300";
    const playlistCache = isRestricted(library) ? "private, no-cache" : "no-cache";

    if (asset.kind === "thumbnail") {
      const uploaded = await this.playback.uploadedThumbnail(video.id);
      if (uploaded) return this.#blob(request, response, uploaded.path, uploaded.content_type, cacheControl);
    }
    const processing = await this.playback.renditions(video.id);
    if (video.status !== "ready" || !processing) return this.#error(response, 404);
    const prefix = renditionPrefix(libraryId, video.id, processing.generation);
    const tokenQuery = access.token ? tokenParams(access.token) : undefined;
    // Playlists name further files: those links carry the viewer's token, so private playback works.
    const sendPlaylist = (text: string) =>
      this.#send(
        request,
        response,
        tokenQuery ? withQuery(text, tokenQuery) : text,
        PLAYLIST_TYPE,
        playlistCache,
      );

    switch (asset.kind) {
      case "thumbnail":
        if (Number(processing.thumbnail_count) < 1) return this.#error(response, 404);
        return this.#blob(
          request,
          response,
          `${prefix}/${THUMBNAIL_DIR}/thumbnail_001.jpg`,
          "image/jpeg",
          cacheControl,
        );
      case "file":
        return this.#blob(request, response, `${prefix}/${asset.file}`, asset.type, cacheControl);
      case "master": {
        const master = await this.#text(`${prefix}/${MASTER_PLAYLIST}`);
        if (master === undefined) return this.#error(response, 404);
        const tracks = (await this.playback.subtitles(video.id)).map((row) => ({
          id: row.id,
          title: row.title,
          language: row.language,
        }));
        const text = withSubtitleTracks(master, tracks);
        return sendPlaylist(text);
      }
      case "media-playlist": {
        const text = await this.#text(`${prefix}/${asset.file}`);
        if (text === undefined) return this.#error(response, 404);
        return sendPlaylist(text);
      }
      case "subtitle-playlist": {
        if (!(await this.playback.subtitle(video.id, asset.subtitleId))) return this.#error(response, 404);
        const text = subtitlePlaylist(asset.subtitleId, Number(processing.duration_s));
        return sendPlaylist(text);
      }
      case "subtitle": {
        const subtitle = await this.playback.subtitle(video.id, asset.subtitleId);
        if (!subtitle) return this.#error(response, 404);
        const startPts = Number(processing.timeline_start_pts ?? MUXER_START_PTS);
        // A new source may start its segments elsewhere: the map is part of what is kept.
        const kept = `${subtitle.path} ${startPts}`;
        let vtt = this.#subtitles.get(kept);
        if (vtt === undefined) {
          const content = await this.#text(subtitle.path);
          if (content === undefined) return this.#error(response, 404);
          vtt = subtitle.format === "srt" ? srtToVtt(content) : content.replace(/^\uFEFF/, "");
          vtt = withTimestampMap(vtt, startPts);
          this.#subtitles.set(kept, vtt);
        }
        return this.#send(request, response, vtt, "text/vtt; charset=utf-8", cacheControl);
      }
    }
  }

  async #text(key: string): Promise<string | undefined> {
    if (!(await this.blobs.stat(key))) return undefined;
    const chunks: Buffer[] = [];
    for await (const chunk of this.blobs.open(key)) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString("utf8");
  }

  /** Refusals too are readable by players on other origins, so a web player can say why. */
  #error(response: ServerResponse, status: 403 | 404, message?: string): number {
    return sendJsonError(
      response,
      status,
      status === 403
        ? { success: false, error: "forbidden", message }
        : { success: false, message: "Resource not found" },
      FROM_THE_STORE,
    );
  }

  #send(
    request: IncomingMessage,
    response: ServerResponse,
    text: string,
    type: string,
    cacheControl: string,
  ): number {
    const body = Buffer.from(text, "utf8");
    response.writeHead(200, {
      "content-type": type,
      "content-length": body.length,
      "cache-control": cacheControl,
      ...FROM_THE_STORE,
    });
    const head = request.method === "HEAD";
    response.end(head ? undefined : body);
    return head ? 0 : body.length;
  }

  /** A stored file with validators, conditional requests and one byte range. */
  async #blob(
    request: IncomingMessage,
    response: ServerResponse,
    key: string,
    type: string,
    cacheControl: string,
  ): Promise<number> {
    const found = await this.blobs.stat(key);
    if (!found) return this.#error(response, 404);
    const size = found.sizeBytes;
    const headers: OutgoingHttpHeaders = {
      "content-type": type,
      "cache-control": cacheControl,
      etag: `"${size.toString(16)}-${found.modifiedAt.getTime().toString(16)}"`,
      "last-modified": found.modifiedAt.toUTCString(),
      "accept-ranges": "bytes",
      ...FROM_THE_STORE,
    };
    return streamRepresentation(
      request,
      response,
      headers,
      size,
      (window) => this.blobs.open(key, window),
      (error) => this.logger.debug({ err: error }, "media response ended early"),
      FROM_THE_STORE,
    );
  }
}

function tokenParams(token: ViewerToken): string {
  return new URLSearchParams({ token: token.token, expires: token.expires }).toString();
}
