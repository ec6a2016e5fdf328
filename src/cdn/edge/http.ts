import { randomUUID } from "node:crypto";
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import type { Resolved } from "./cache-policy.ts";

export type HeaderMap = Record<string, string | string[] | undefined>;

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/**
 * An origin answer's headers as the viewer must follow them. The origin redirects in its own URL
 * space: a `Location` path from its root, or an absolute URL on the origin itself (a server naming
 * its own host), holds the origin URL's base path and lacks a path-style viewer's `/{hostname}`
 * prefix. Such a target becomes the edge path that maps to it; relative references and other hosts'
 * URLs already lead where the origin meant.
 */
export function viewerRedirect(headers: OutgoingHttpHeaders, resolved: Resolved): OutgoingHttpHeaders {
  const { location } = headers;
  if (typeof location !== "string" || !/^(\/|[a-z][a-z\d+.-]*:)/i.test(location)) return headers;
  let origin: URL;
  let target: URL;
  try {
    origin = new URL(resolved.distribution.origin_url);
    target = new URL(location, origin);
  } catch {
    return headers;
  }
  const basePath = origin.pathname.replace(/\/+$/, "");
  if (target.origin !== origin.origin || !`${target.pathname}/`.startsWith(`${basePath}/`)) return headers;
  const path = target.pathname.slice(basePath.length) || "/";
  return { ...headers, location: `${resolved.pathPrefix ?? ""}${path}${target.search}${target.hash}` };
}

/**
 * An origin's header lines as one value per name, repeated lines joined with ", " as RFC 9110
 * section 5.3 combines them (`Cache-Control: max-age=600` and `Cache-Control: public`); `Set-Cookie`
 * alone stays a list. The cache's policy and validators read each as one value.
 */
export function combinedHeaders(headers: HeaderMap): HeaderMap {
  const out: HeaderMap = {};
  for (const [name, value] of Object.entries(headers)) {
    out[name] = Array.isArray(value) && name.toLowerCase() !== "set-cookie" ? value.join(", ") : value;
  }
  return out;
}

/**
 * Cookies an origin may not set through the edge: the platform's own (`cumulo_*`, the console's
 * session, also `__Host-` prefixed). The edge answers on the console's host by default (another
 * port: cookies ignore ports), so a tenant's origin could otherwise swap a viewer's console session
 * for its own. Also nameless (`=cumulo_session=...`): a browser that keeps one sends its value
 * alone, which reads as the named cookie (RFC 6265bis, 5.7).
 */
const PLATFORM_COOKIE = /^[\s=]*(?:__(?:host|secure)-)?cumulo_/i;

const tenantCookies = (value: HeaderMap[string]): string[] =>
  [value ?? []].flat().filter((cookie) => !PLATFORM_COOKIE.test(String(cookie)));

/** Header names a `Connection` header lists: hop-by-hop for this message only (RFC 9110, 7.6.1). */
export function connectionNames(connection: HeaderMap[string]): string[] {
  return [connection ?? []]
    .flat()
    .join(",")
    .toLowerCase()
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "");
}

/** Every Cumulo edge node's name in `CDN-Loop` (RFC 8586): `cumulo-` and 8 hex digits, chosen at start. */
export const newCdnLoopName = (): string => `cumulo-${randomUUID().slice(0, 8)}`;
const CDN_LOOP_NAME = /^cumulo-[0-9a-f]{8}$/;

/** The CDN names a request's `CDN-Loop` lists, lower case, without their parameters. */
export function cdnLoopNames(headers: IncomingHttpHeaders): string[] {
  return [headers["cdn-loop"] ?? []]
    .flat()
    .join(",")
    .split(",")
    .map((info) => info.split(";", 1)[0]?.trim().toLowerCase() ?? "");
}

/** Whether a request is a Cumulo edge's origin request (any node's), not a viewer's own. */
export const sentByCumuloEdge = (headers: IncomingHttpHeaders): boolean =>
  cdnLoopNames(headers).some((name) => CDN_LOOP_NAME.test(name));

/** The edge's name in `Via` entries (RFC 9110, 7.6.3). */
const VIA_PSEUDONYM = "cumulo-edge";

/**
 * A `Via` list with the edge's entry appended: `received` is the list the message came with, `version`
 * the HTTP version it was received with (`1.1`; the `HTTP/` name is left out, RFC 9110 7.6.3).
 */
export function viaAppended(received: OutgoingHttpHeaders[string], version: string): string {
  const entry = `${version} ${VIA_PSEUDONYM}`;
  const list = [received ?? []].flat().join(", ").trim();
  return list ? `${list}, ${entry}` : entry;
}

/**
 * Origin response headers a viewer may see: hop-by-hop ones and the edge's own (Age, X-Cache,
 * X-Request-Id, Accept-Ranges) removed, cookies of the platform's own names removed, and the edge's
 * entry appended to `Via` (the origin talks HTTP/1.1 to the edge).
 */
export function endToEndHeaders(headers: HeaderMap): OutgoingHttpHeaders {
  const named = connectionNames(headers.connection);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (value === undefined || HOP_BY_HOP.has(lower) || named.includes(lower)) continue;
    // The edge's own: its Age and X-Cache, its request id, and whether it serves ranges of this answer.
    if (lower === "age" || lower === "x-cache" || lower === "x-request-id" || lower === "accept-ranges")
      continue;
    if (lower === "set-cookie") {
      const kept = tenantCookies(value);
      if (kept.length > 0) out[lower] = kept;
      continue;
    }
    out[lower] = value;
  }
  out.via = viaAppended(out.via, "1.1");
  return out;
}

const first = (value: string | string[] | number | undefined): string | undefined =>
  Array.isArray(value) ? value[0] : value === undefined ? undefined : String(value);

export type RangeResult =
  | { kind: "none" }
  | { kind: "range"; start: number; end: number }
  | { kind: "unsatisfiable" };

/**
 * One `bytes=` range of a representation of `size` bytes. Several ranges, other units and malformed
 * values are ignored (the whole representation is sent), as RFC 9110 allows.
 */
export function parseRange(header: string | undefined, size: number): RangeResult {
  if (header === undefined) return { kind: "none" };
  const match = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!match) return { kind: "none" };
  const [, startText = "", endText = ""] = match;
  if (startText === "" && endText === "") return { kind: "none" };
  if (startText === "") {
    const suffix = Number(endText);
    if (suffix === 0 || size === 0) return { kind: "unsatisfiable" };
    return { kind: "range", start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(startText);
  const end = endText === "" ? size - 1 : Math.min(Number(endText), size - 1);
  if (endText !== "" && Number(endText) < start) return { kind: "none" };
  if (start >= size) return { kind: "unsatisfiable" };
  return { kind: "range", start, end };
}

const opaqueTag = (tag: string): string => tag.trim().replace(/^W\//, "");

/** `If-Range`: the range applies only when the validator still names this representation. */
export function ifRangeMatches(request: IncomingHttpHeaders, response: OutgoingHttpHeaders): boolean {
  const condition = first(request["if-range"])?.trim();
  if (condition === undefined) return true;
  const etag = first(response.etag);
  if (condition.startsWith('"') || condition.startsWith("W/")) {
    // a strong comparison: weak tags never match
    return etag !== undefined && !etag.startsWith("W/") && etag === condition;
  }
  const lastModified = first(response["last-modified"]);
  const date = Date.parse(condition);
  return lastModified !== undefined && !Number.isNaN(date) && Date.parse(lastModified) === date;
}

/**
 * Whether a GET/HEAD fails its preconditions on this representation (412, RFC 9110 13.2.2 steps 1-2):
 * `If-Match` (strong comparison, so a weak or missing `ETag` never matches; `*` matches any current
 * representation) or, without it, `If-Unmodified-Since` against `Last-Modified` (ignored when either
 * date is missing or unreadable, 13.1.4).
 */
export function preconditionFailed(request: IncomingHttpHeaders, response: OutgoingHttpHeaders): boolean {
  const ifMatch = request["if-match"];
  if (ifMatch !== undefined) {
    if (ifMatch.trim() === "*") return false;
    const etag = first(response.etag)?.trim();
    if (etag === undefined || etag.startsWith("W/")) return true;
    return !ifMatch.split(",").some((tag) => tag.trim() === etag);
  }
  const ifUnmodifiedSince = request["if-unmodified-since"];
  const lastModified = first(response["last-modified"]);
  if (ifUnmodifiedSince === undefined || lastModified === undefined) return false;
  const since = Date.parse(ifUnmodifiedSince);
  const modified = Date.parse(lastModified);
  return !Number.isNaN(since) && !Number.isNaN(modified) && modified > since;
}

/**
 * Whether a GET/HEAD with these conditional headers gets 304 for this representation:
 * `If-None-Match` (weak comparison) wins over `If-Modified-Since`.
 */
export function notModified(request: IncomingHttpHeaders, response: OutgoingHttpHeaders): boolean {
  const ifNoneMatch = request["if-none-match"];
  if (ifNoneMatch !== undefined) {
    const etag = first(response.etag);
    if (ifNoneMatch.trim() === "*") return true;
    if (etag === undefined) return false;
    return ifNoneMatch.split(",").some((tag) => opaqueTag(tag) === opaqueTag(etag));
  }
  const ifModifiedSince = request["if-modified-since"];
  const lastModified = first(response["last-modified"]);
  if (ifModifiedSince === undefined || lastModified === undefined) return false;
  const since = Date.parse(ifModifiedSince);
  const modified = Date.parse(lastModified);
  return !Number.isNaN(since) && !Number.isNaN(modified) && modified <= since;
}

/** Headers of a 304: the representation's metadata without its body framing. */
export function notModifiedHeaders(headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const out = { ...headers };
  for (const name of ["content-length", "content-range", "content-type", "content-encoding"])
    delete out[name];
  return out;
}

export type ConditionalOutcome = { kind: "precondition-failed" } | { kind: "not-modified" } | RangeResult;

/**
 * What a GET or HEAD of a complete representation answers, in RFC 9110's order (13.2.2): 412 when
 * its preconditions fail, 304 when its validators match, else, for a GET, the range it asks for (only
 * when If-Range, if any, still matches); a HEAD ignores Range (RFC 9110, 14.2) and describes the
 * whole representation.
 */
export function conditionalOutcome(
  method: string | undefined,
  request: IncomingHttpHeaders,
  response: OutgoingHttpHeaders,
  size: number,
): ConditionalOutcome {
  if (preconditionFailed(request, response)) return { kind: "precondition-failed" };
  if (notModified(request, response)) return { kind: "not-modified" };
  if (method !== "GET") return { kind: "none" };
  return ifRangeMatches(request, response) ? parseRange(request.range, size) : { kind: "none" };
}
