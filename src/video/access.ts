import type { Selectable } from "kysely";
import type { LibraryTable } from "../media/tables.ts";
import { readJson } from "../store/codec.ts";
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

export type AccessDecision =
  | {
      allowed: true /** Present when the request carried a valid token, to pass on in playlists. */;
      token?: string;
      expires?: string;
    }
  | { allowed: false; message: string };

const first = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value[0] : value;

/** The viewer as the playback rules see it, from request headers and the query. */
export function viewerOf(
  headers: Record<string, string | string[] | undefined>,
  query: URLSearchParams,
): Viewer {
  const country = first(headers["cf-ipcountry"]) ?? first(headers["x-viewer-country"]);
  return {
    referer: first(headers.referer),
    country: country?.trim().toUpperCase() || undefined,
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
export function decideAccess(
  library: Selectable<LibraryTable>,
  videoId: string,
  viewer: Viewer,
  tokens: PlaybackTokens,
): AccessDecision {
  const referrers = ruleOf(library.whitelist_referrers);
  if (referrers) {
    const host = viewer.referer === undefined ? undefined : (refererHost(viewer.referer) ?? "");
    const listed =
      host !== undefined && referrers.values.some((value) => hostMatches(host, value.toLowerCase()));
    if (referrers.action === "allow") {
      const admitted = referrers.values.length === 0 ? viewer.referer === undefined : listed;
      if (!admitted) return { allowed: false, message: "This referrer may not play this video" };
    } else if (listed) {
      return { allowed: false, message: "This referrer may not play this video" };
    }
  }
  const countries = ruleOf(library.blocked_countries);
  if (countries) {
    const listed =
      viewer.country !== undefined &&
      countries.values.some((value) => value.toUpperCase() === viewer.country);
    if (countries.action === "allow" ? !listed : listed) {
      return { allowed: false, message: "This video is not available in your country" };
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
    return { allowed: false, message };
  }
  return check === "valid"
    ? { allowed: true, token: viewer.token, expires: viewer.expires }
    : { allowed: true };
}
