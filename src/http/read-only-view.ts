import type { AuthContext } from "../identity/service.ts";
import { isSecretName, isSecretParam, loggableUrl, MASK } from "./masking.ts";

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

/**
 * What of an endpoint's custom headers a receiver may repeat: each value, the credential after a
 * scheme word (the token of `Bearer <token>`) and a `Basic` credential's `user:password` and
 * password decoded. A value of 1 to 3 characters under a name that is not a credential's
 * (`X-Tenant: 42`, `X-Debug: 1`) is a setting, not looked for; under a credential's name it is a
 * secret too short to find (see `textShownTo`).
 */
export function headerCredentialsIn(headers: Record<string, string> | null): string[] {
  return Object.entries(headers ?? {}).flatMap(([name, value]) => {
    const credential = /^[A-Za-z][\w.-]*\s+(\S.*)$/.exec(value)?.[1];
    const basic = /^basic\s/i.test(value) ? basicCredentials(credential) : [];
    // The blanks around a value are not sent (RFC 9110, 5.5): the receiver repeats it without them.
    const found = [value, value.trim(), ...(credential === undefined ? [] : [credential]), ...basic];
    return isSecretName(name) ? found : found.filter((secret) => secret.length >= SHORTEST_FOUND);
  });
}

/** A `Basic` credential's `user:password` and password, or none when it is not base64 of a `user:password`. */
function basicCredentials(encoded: string | undefined): string[] {
  if (encoded === undefined || !/^[A-Za-z\d+/]+={0,2}$/.test(encoded)) return [];
  const bytes = Buffer.from(encoded, "base64");
  // UTF-8, or else Latin-1 (RFC 7617 leaves the charset to the parties; many encode in Latin-1).
  const utf8 = bytes.toString();
  const decoded = utf8.includes("\uFFFD") ? bytes.toString("latin1") : utf8;
  const colon = decoded.indexOf(":");
  return colon === -1 ? [] : [decoded, decoded.slice(colon + 1)];
}

/** Values shorter than this cannot be looked for in text: masking every `42` would hide the rest. */
const SHORTEST_FOUND = 4;

/** `n` in hexadecimal with `width` digits at least, as a pattern that takes either case of each letter. */
const hexPattern = (n: number, width: number): string =>
  n
    .toString(16)
    .padStart(width, "0")
    .replace(/[a-f]/g, (digit) => `[${digit}${digit.toUpperCase()}]`);

/** Text as a pattern that matches it literally. */
const literalPattern = (text: string): string =>
  [...text].map((char) => `\\u{${(char.codePointAt(0) ?? 0).toString(16)}}`).join("");

const HTML_NAMED: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&apos;",
};

/**
 * A character as a pattern: letters and digits as they are (no encoder escapes them), any other
 * character also escaped as JSON writes it (`\u002b`, `\"`, PHP's `\/`), as a URL does (`%2B`, its
 * UTF-8 bytes, `+` for a space) or as HTML does (`&#43;`, `&#x2b;`, `&amp;`), in either case of
 * hexadecimal, whichever way each character of the text was written.
 */
function escapedCharPattern(char: string): string {
  if (/^[A-Za-z\d]$/.test(char)) return char;
  const code = char.codePointAt(0) ?? 0;
  const json = JSON.stringify(char).slice(1, -1);
  const ways = [
    literalPattern(char),
    [...Array(char.length).keys()].map((unit) => `\\\\u${hexPattern(char.charCodeAt(unit), 4)}`).join(""),
    [...Buffer.from(char)].map((byte) => `%${hexPattern(byte, 2)}`).join(""),
    // A Latin-1 letter percent-encoded from the byte a header value carries it as.
    ...(code >= 0x80 && code <= 0xff ? [`%${hexPattern(code, 2)}`] : []),
    `&#0*${code};`,
    `&#[xX]0*${hexPattern(code, 1)};`,
    ...(json === char ? [] : [literalPattern(json)]),
    ...(char === "/" ? [literalPattern("\\/")] : []),
    ...(char === " " ? [literalPattern("+")] : []),
    ...(char in HTML_NAMED ? [literalPattern(HTML_NAMED[char] ?? "")] : []),
  ];
  return `(?:${ways.join("|")})`;
}

/** `escapedCharPattern` of each ASCII character, by its code: secrets are mostly ASCII, and a pattern is built for every character of every form. */
const ASCII_PATTERNS = Array.from({ length: 128 }, (_, code) =>
  escapedCharPattern(String.fromCharCode(code)),
);

const charPattern = (char: string): string => ASCII_PATTERNS[char.charCodeAt(0)] ?? escapedCharPattern(char);

/**
 * The forms a secret takes when a receiver repeats it re-encoded: as it is, hexadecimal, and
 * base64 and base64url (with and without padding) of its bytes, also the part of each that is the
 * same wherever the value stands in a longer base64 text (its three alignments to the 3-byte
 * groups: a `user:password` inside a `Basic` credential, a token inside a base64 JSON). Its bytes
 * are its UTF-8, and for text of Latin-1 letters (`für`) also its Latin-1, which is how a header
 * value goes out: repeated raw, those bytes read back as U+FFFD (QA of 6 December).
 */
function formsOf(secret: string): string[] {
  const codes = [...secret].map((char) => char.codePointAt(0) ?? 0);
  const asHeader = codes.some((code) => code >= 0x80) && codes.every((code) => code <= 0xff);
  const encodings = asHeader ? [Buffer.from(secret), Buffer.from(secret, "latin1")] : [Buffer.from(secret)];
  const forms = [secret, ...(asHeader ? [Buffer.from(secret, "latin1").toString()] : [])];
  for (const bytes of encodings) {
    const base64 = [bytes.toString("base64"), bytes.toString("base64").replace(/=+$/, "")];
    for (const offset of [0, 1, 2]) {
      const aligned = Buffer.concat([Buffer.alloc(offset), bytes]).toString("base64");
      // Characters whose 6 bits all come from the secret's bytes: not those shared with its neighbours.
      base64.push(aligned.slice(Math.ceil((8 * offset) / 6), Math.floor((8 * (offset + bytes.length)) / 6)));
    }
    const base64url = base64.map((form) => form.replaceAll("+", "-").replaceAll("/", "_"));
    const hex = bytes.toString("hex");
    forms.push(hex, hex.toUpperCase(), ...base64, ...base64url);
  }
  return forms.filter((form) => form.length >= SHORTEST_FOUND);
}

/** A pattern of every form of `secret`, each written with any of its characters escaped; the longest forms first. */
function secretPattern(secret: string): RegExp {
  const forms = [...new Set(formsOf(secret))].sort((a, b) => b.length - a.length);
  return new RegExp(forms.map((form) => [...form].map(charPattern).join("")).join("|"), "gu");
}

/**
 * How a reader is shown text a third party sent back, which may repeat what Cumulo sent it (a
 * webhook receiver echoing the request): for a reader, every occurrence of `secrets`, in any of
 * the forms and escapes above, replaced by `***`; the whole text `***` when one of `secrets` is of
 * 1 to 3 characters, which cannot be looked for without masking unrelated text; for others, the
 * text as it is. The patterns are built once, for all the texts of one answer.
 */
export function textShownTo(viewer: Viewer, secrets: readonly string[]): (text: string) => string {
  if (!viewer.readOnly) return (text) => text;
  const sought = [...new Set(secrets.filter((secret) => secret !== ""))];
  if (sought.some((secret) => secret.length < SHORTEST_FOUND)) return (text) => (text === "" ? text : MASK);
  const patterns = sought.map(secretPattern);
  return (text) => {
    const found = patterns
      .flatMap((pattern) =>
        [...text.matchAll(pattern)].map((match) => [match.index, match.index + match[0].length] as const),
      )
      .sort(([a], [b]) => a - b);
    // Occurrences that overlap (a header value and the token inside it) become one mask.
    let shown = "";
    let shownTo = 0;
    for (const [from, to] of found) {
      if (to <= shownTo) continue;
      if (from >= shownTo) shown += `${text.slice(shownTo, from)}${MASK}`;
      shownTo = to;
    }
    return shown + text.slice(shownTo);
  };
}
