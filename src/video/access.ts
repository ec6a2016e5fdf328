import type { PlayerRepository } from "../media/player-repository.ts";
import type { LibraryRepository } from "../media/repository.ts";
import type { LibraryRow, VideoRow } from "../media/tables.ts";
import type { VideoRepository } from "../media/video-repository.ts";
import { readJson } from "../store/codec.ts";
import { LastReads } from "./last-reads.ts";
import type { VideoProcessingRepository } from "./repository.ts";
import type { PlaybackTokens } from "./tokens.ts";

interface Rule {
  action: "allow" | "deny";
  values: string[];
  enabled: boolean;
}

export interface Viewer {
  referer: string | undefined;
  country: string | undefined;
  token: string | undefined;
  expires: string | undefined;
}

/** A valid token the request carried, to pass on in the links it is answered with. */
export interface ViewerToken {
  token: string;
  expires: string;
}

export type Admission =
  | { outcome: "admitted"; library: LibraryRow; video: VideoRow; token: ViewerToken | undefined }
  | { outcome: "not_found" }
  | { outcome: "refused"; message: string };

type Decision =
  | { outcome: "admitted"; token: ViewerToken | undefined }
  | { outcome: "refused"; message: string };

/** A request header's first value (Node gives a list for some repeated headers). */
export const first = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value[0] : value;

/** The viewer as the playback rules see it, from request headers, the query and their country. */
export function viewerOf(
  headers: Record<string, string | string[] | undefined>,
  query: URLSearchParams,
  country: string | undefined,
): Viewer {
  return {
    referer: first(headers.referer),
    country,
    token: query.get("token") ?? undefined,
    expires: query.get("expires") ?? undefined,
  };
}

function refererHost(referer: string): string | undefined {
  try {
    return new URL(referer).hostname.toLowerCase().replace(/\.$/, "") || undefined;
  } catch {
    return undefined;
  }
}

/** `example.com` matches that host only; `*.example.com` matches every host below it. */
const hostMatches = (host: string, pattern: string): boolean =>
  pattern.startsWith("*.") ? host.endsWith(pattern.slice(1)) : host === pattern;

function ruleOf(json: string): Rule | undefined {
  const rule = readJson<Rule>(json);
  return rule && rule.enabled !== false && Array.isArray(rule.values) ? rule : undefined;
}

/**
 * The library's security settings applied to one playback request: referrer rule, country rule, then
 * `video_privacy` `private` (a valid token for this video). Disabled rules are ignored.
 */
function decide(library: LibraryRow, videoId: string, viewer: Viewer, tokens: PlaybackTokens): Decision {
  const referrers = ruleOf(library.whitelist_referrers);
  if (referrers) {
    const host = viewer.referer === undefined ? undefined : (refererHost(viewer.referer) ?? "");
    const listed =
      host !== undefined && referrers.values.some((value) => hostMatches(host, value.toLowerCase()));
    if (referrers.action === "allow") {
      const admitted = referrers.values.length === 0 ? viewer.referer === undefined : listed;
      if (!admitted) return { outcome: "refused", message: "This referrer may not play this video" };
    } else if (listed) {
      return { outcome: "refused", message: "This referrer may not play this video" };
    }
  }
  const countries = ruleOf(library.blocked_countries);
  if (countries) {
    const listed =
      viewer.country !== undefined &&
      countries.values.some((value) => value.toUpperCase() === viewer.country);
    if (countries.action === "allow" ? !listed : listed) {
      return { outcome: "refused", message: "This video is not available in your country" };
    }
  }
  const check = tokens.check(videoId, viewer.token, viewer.expires);
  if (library.video_privacy === "private" && check !== "valid") {
    const message =
      check === "missing"
        ? "This video needs a playback token"
        : check === "expired"
          ? "The playback token has expired"
          : "The playback token is not valid";
    return { outcome: "refused", message };
  }
  const token =
    check === "valid" && viewer.token !== undefined && viewer.expires !== undefined
      ? { token: viewer.token, expires: viewer.expires }
      : undefined;
  return { outcome: "admitted", token };
}

/**
 * Who may play what: the one place the playback rules are applied, for the edge's media origin and
 * the embed page alike, and what playback reads of a video (its media rows belong to media). Every
 * read goes through `LastReads`, so videos being watched keep playing while the store is away.
 */
export class PlaybackAccess {
  readonly #reads = new LastReads();

  constructor(
    private readonly libraries: LibraryRepository,
    private readonly videos: VideoRepository,
    private readonly players: PlayerRepository,
    private readonly processing: VideoProcessingRepository,
    private readonly tokens: PlaybackTokens,
  ) {}

  /** The library's rules applied to a viewer of one of its videos (playback is not authenticated). */
  async admit(libraryId: string, videoId: string, viewer: Viewer): Promise<Admission> {
    const library = await this.#reads.read(`library ${libraryId}`, () => this.libraries.findById(libraryId));
    const video = library
      ? await this.#reads.read(`video ${libraryId} ${videoId}`, () => this.videos.find(libraryId, videoId))
      : undefined;
    if (!library || !video) return { outcome: "not_found" };
    const decision = decide(library, video.id, viewer, this.tokens);
    return decision.outcome === "admitted" ? { ...decision, library, video } : decision;
  }

  /** The processing state of the video's current source: which renditions exist. */
  renditions(videoId: string) {
    return this.#reads.read(`renditions ${videoId}`, () => this.processing.find(videoId), {
      keepNotFound: true,
    });
  }

  /** Live subtitles, oldest first (the order of the HLS master's tracks). */
  subtitles(videoId: string) {
    return this.#reads.read(`subtitles ${videoId}`, () => this.videos.subtitlesOldestFirst(videoId));
  }

  subtitle(videoId: string, id: string) {
    return this.#reads.read(`subtitle ${videoId} ${id}`, () => this.videos.findSubtitle(videoId, id));
  }

  uploadedThumbnail(videoId: string) {
    return this.#reads.read(`thumbnail ${videoId}`, () => this.videos.latestThumbnail(videoId), {
      keepNotFound: true,
    });
  }

  /** The named player of the library, else (no name) its default one. */
  player(libraryId: string, playerId: string | undefined) {
    return this.#reads.read(
      `player ${libraryId} ${playerId ?? ""}`,
      () => (playerId ? this.players.find(libraryId, playerId) : this.players.findDefault(libraryId)),
      { keepNotFound: playerId === undefined },
    );
  }
}
