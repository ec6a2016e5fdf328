import type { AuthContext } from "../identity/service.ts";
import { isSecretParam, loggableUrl, MASK } from "./masking.ts";

// What a read-only key or user is shown of values that may hold a credential; write-capable
// callers see them as stored (docs/security.md, "Read-only keys and secrets"). Every route that
// answers such a value (webhook endpoints, CDN distributions, video imports) goes through here.

type Viewer = Pick<AuthContext, "readOnly">;

/** A URL Cumulo calls (a webhook endpoint, an import, a CDN origin): `urlWithoutCredentials` for a reader. */
export const urlShownTo = (viewer: Viewer, url: string): string =>
  viewer.readOnly ? urlWithoutCredentials(url) : url;

/** A signing secret: `null` for a reader. */
export const secretShownTo = (viewer: Viewer, secret: string | null): string | null =>
  viewer.readOnly ? null : secret;

/** Custom request headers (often the receiver's own credential): their names, each value `***`, for a reader. */
export const headersShownTo = <Headers extends Record<string, string> | null>(
  viewer: Viewer,
  headers: Headers,
): Headers =>
  viewer.readOnly && headers
    ? (Object.fromEntries(Object.keys(headers).map((name) => [name, MASK])) as Headers)
    : headers;

/**
 * Known services that put a webhook's secret in its URL's path, and which segment holds it
 * (`segments` is the path split at `/`: `""` before the first `/` is index 0).
 */
const KNOWN_PATH_SECRETS: { host: RegExp; secretAt: (segments: string[]) => number }[] = [
  // Slack: /services/T…/B…/{secret}, /workflows/T…/A…/{id}/{secret}, /triggers/T…/{id}/{secret}.
  {
    host: /^hooks\.slack(-gov)?\.com$/,
    secretAt: (segments) =>
      ["services", "workflows", "triggers"].includes(segments[1] ?? "")
        ? segments.findLastIndex((segment) => segment !== "")
        : -1,
  },
  // Discord: /api[/v10]/webhooks/{id}/{token}[/slack|/github].
  {
    host: /^((ptb|canary)\.)?discord(app)?\.com$/,
    secretAt: (segments) => (segments[1] === "api" ? after(segments, "webhooks", 2) : -1),
  },
  // Zapier: /hooks/catch/{account}/{secret}/.
  { host: /^hooks\.zapier\.com$/, secretAt: (segments) => after(segments, "catch", 2) },
  // IFTTT Webhooks: /trigger/{event}/with/key/{key}, /use/{key}.
  {
    host: /^maker\.ifttt\.com$/,
    secretAt: (segments) => (segments[1] === "use" ? 2 : after(segments, "key", 1)),
  },
];

/** The index `distance` segments after the first `name`, or -1 without one. */
function after(segments: string[], name: string, distance: number): number {
  const at = segments.indexOf(name);
  return at === -1 ? -1 : at + distance;
}

const UUID = /^[\da-f]{8}-[\da-f]{4}-[\da-f]{4}-[\da-f]{4}-[\da-f]{12}$/i;
/** How long a segment and the run of letters and digits inside it must be to look generated. */
const SECRET_SEGMENT_MIN = 16;
const SECRET_RUN_MIN = 10;

/**
 * A path segment that looks generated rather than written: a UUID, or at least 16 characters
 * holding a run of at least 10 letters and digits (between `-`, `_`, `.`, `:`, ...) that mixes
 * both. Words, numbers and slugs (`video-events`, `v1`, `2024-06-01`, `h264-1080p`) are not.
 */
function looksSecret(segment: string): boolean {
  if (UUID.test(segment)) return true;
  if (segment.length < SECRET_SEGMENT_MIN) return false;
  return (segment.match(/[A-Za-z\d]+/g) ?? []).some(
    (run) => run.length >= SECRET_RUN_MIN && /[A-Za-z]/.test(run) && /\d/.test(run),
  );
}

/** Whether a URL's path segment (`segments[index]`) holds a secret: a known service's, or one that looks generated. */
function isSecretSegment(host: string, segments: string[]): (segment: string, index: number) => boolean {
  const known = KNOWN_PATH_SECRETS.find((service) => service.host.test(host))?.secretAt(segments) ?? -1;
  return (segment, index) => segment !== "" && (index === known || looksSecret(segment));
}

/** A URL as written, cut into the parts its credentials are looked for in; `server` undefined without an authority. */
function partsOf(text: string) {
  const hashAt = text.indexOf("#");
  const [beforeHash, hash] = hashAt === -1 ? [text, ""] : [text.slice(0, hashAt), text.slice(hashAt)];
  const authority = /^([a-z][a-z\d+.-]*:\/\/)([^/?#]*)/i.exec(beforeHash);
  if (!authority) return { beforeHash, hash, server: undefined };
  const [whole, scheme = "", server = ""] = authority;
  const at = server.lastIndexOf("@");
  const colon = server.indexOf(":");
  const host = server
    .slice(at + 1)
    .replace(/:\d*$/, "")
    .replace(/\.$/, "")
    .toLowerCase();
  const rest = beforeHash.slice(whole.length);
  const queryAt = rest.indexOf("?");
  const [path, query] = queryAt === -1 ? [rest, ""] : [rest.slice(0, queryAt), rest.slice(queryAt)];
  return {
    beforeHash,
    hash,
    scheme,
    server,
    /** Where the user info's password starts and ends in `server`, when it has one. */
    password: colon !== -1 && colon < at ? { from: colon + 1, to: at } : undefined,
    host,
    path,
    query,
  };
}

/**
 * A URL as written, with its credentials masked and the rest untouched: the password of its user
 * info (`user:***@`), the path segments that look like secrets (a known service's, or generated-looking)
 * and the credential-named parameters of its query (`?token=***`).
 */
export function urlWithoutCredentials(text: string): string {
  const parts = partsOf(text);
  if (parts.server === undefined) return loggableUrl(parts.beforeHash) + parts.hash;
  const { scheme, server, password, host, path, query, hash } = parts;
  const shownServer = password
    ? `${server.slice(0, password.from)}${MASK}${server.slice(password.to)}`
    : server;
  const segments = path.split("/");
  const secret = isSecretSegment(host, segments);
  const shownPath = segments.map((segment, index) => (secret(segment, index) ? MASK : segment)).join("/");
  return loggableUrl(`${scheme}${shownServer}${shownPath}${query}`) + hash;
}

/**
 * The values `urlWithoutCredentials` masks, as written and decoded: the user info's password, the
 * secret path segments and the credential parameters' values.
 */
export function credentialsIn(text: string): string[] {
  const parts = partsOf(text);
  const found: string[] = [];
  const queryAt = parts.beforeHash.indexOf("?");
  const query = queryAt === -1 ? "" : parts.beforeHash.slice(queryAt + 1);
  for (const pair of query.split("&")) {
    const [[name, value] = ["", ""]] = new URLSearchParams(pair);
    if (isSecretParam(name, value)) found.push(value, pair.slice(pair.indexOf("=") + 1));
  }
  if (parts.server === undefined) return found;
  const { server, password, host, path } = parts;
  if (password) found.push(server.slice(password.from, password.to));
  const segments = path.split("/");
  const secret = isSecretSegment(host, segments);
  found.push(...segments.filter(secret));
  return found.flatMap((value) => [value, decoded(value)]);
}

/** `%`-escapes decoded, or the text as it is when they are malformed. */
function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Values shorter than this are not looked for in text: they are no credential, and masking every `42` would hide the rest. */
const SHORTEST_MASKED = 4;

/**
 * The spellings a value may take in text that repeats it: as it is, `%`-escaped (a URL), escaped
 * in a JSON string (also with `\/`, as PHP writes it) and in HTML.
 */
function spellings(value: string): string[] {
  const json = JSON.stringify(value).slice(1, -1);
  const html = value
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;");
  return [value, encodeURIComponent(value), json, json.replaceAll("/", "\\/"), html];
}

/**
 * Text a third party sent back, which may repeat what Cumulo sent it (a webhook receiver echoing
 * the request): for a reader, every occurrence of `secrets` (each at least 4 characters long, in
 * the spellings above) replaced by `***`, the longest first; for others, as it is.
 */
export function textShownTo(viewer: Viewer, text: string, secrets: readonly string[]): string {
  if (!viewer.readOnly || text === "") return text;
  const sought = [
    ...new Set(secrets.filter((secret) => secret.length >= SHORTEST_MASKED).flatMap(spellings)),
  ];
  return sought
    .sort((a, b) => b.length - a.length)
    .reduce((shown, secret) => shown.replaceAll(secret, MASK), text);
}
