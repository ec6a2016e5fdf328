import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { CachedObject } from "./cache.ts";
import type { Resolved } from "./cache-policy.ts";
import { conditionalOutcome, notModifiedHeaders, viewerRedirect } from "./http.ts";

/**
 * Writing answers to viewers, shared by the edge and the media origin: JSON errors, and complete
 * representations with HEAD, conditional requests (412, 304) and one byte range (206, 416).
 */

/** A JSON error answer (no body for HEAD, never stored downstream); returns the body bytes sent. */
export function sendJsonError(
  response: ServerResponse,
  status: number,
  body: object,
  headers: OutgoingHttpHeaders = {},
): number {
  const bytes = Buffer.from(JSON.stringify(body));
  response.writeHead(status, {
    ...headers,
    "content-type": "application/json; charset=utf-8",
    "content-length": bytes.length,
    "cache-control": "no-store",
  });
  const head = response.req.method === "HEAD";
  response.end(head ? undefined : bytes);
  return head ? 0 : bytes.length;
}

/** A 304 for a representation with these headers: its metadata without its body framing. */
export function sendNotModified(response: ServerResponse, headers: OutgoingHttpHeaders): number {
  response.writeHead(304, notModifiedHeaders(headers));
  response.end();
  return 0;
}

/** A 412: the request's `If-Match` or `If-Unmodified-Since` failed (RFC 9110, 13.2.2). */
export function sendPreconditionFailed(response: ServerResponse, headers: OutgoingHttpHeaders): number {
  return sendJsonError(response, 412, { success: false, message: "Precondition Failed" }, headers);
}

/** Inclusive byte offsets of what a body carries. */
export interface ByteWindow {
  start: number;
  end: number;
}

/**
 * Starts the answer to a GET or HEAD of a complete 200 representation of `size` bytes: 412 (JSON, with
 * `refusalHeaders`) when its preconditions fail, 304 when the request's validators match, 416 (JSON,
 * with `refusalHeaders`) for a range outside it, else 206 for one satisfiable range or 200. Writes
 * everything but the body: `window` is what the body must carry (none for HEAD, 412, 304, 416 and
 * empty bodies), `sent` the body bytes already written.
 */
export function startRepresentation(
  request: IncomingMessage,
  response: ServerResponse,
  headers: OutgoingHttpHeaders,
  size: number,
  refusalHeaders: OutgoingHttpHeaders = {},
): { window?: ByteWindow; sent: number } {
  const outcome = conditionalOutcome(request.method, request.headers, headers, size);
  if (outcome.kind === "precondition-failed")
    return { sent: sendPreconditionFailed(response, refusalHeaders) };
  if (outcome.kind === "not-modified") return { sent: sendNotModified(response, headers) };
  if (outcome.kind === "unsatisfiable") {
    const sent = sendJsonError(
      response,
      416,
      { success: false, message: "Range Not Satisfiable" },
      { ...refusalHeaders, "content-range": `bytes */${size}` },
    );
    return { sent };
  }
  const range = outcome.kind === "range" ? outcome : undefined;
  const window = range ?? { start: 0, end: size - 1 };
  const length = window.end - window.start + 1;
  response.writeHead(range ? 206 : 200, {
    ...headers,
    "content-length": length,
    ...(range ? { "content-range": `bytes ${range.start}-${range.end}/${size}` } : {}),
  });
  if (request.method === "HEAD" || length === 0) {
    response.end();
    return { sent: 0 };
  }
  return { window, sent: 0 };
}

/** A representation held in memory; returns the body bytes sent. */
export function sendRepresentation(
  request: IncomingMessage,
  response: ServerResponse,
  headers: OutgoingHttpHeaders,
  body: Buffer,
  refusalHeaders: OutgoingHttpHeaders = {},
): number {
  const { window, sent } = startRepresentation(request, response, headers, body.length, refusalHeaders);
  if (!window) return sent;
  const slice = body.subarray(window.start, window.end + 1);
  response.end(slice);
  return slice.length;
}

/**
 * A stored representation read as a stream (`open` gives the bytes of a window); returns the body
 * bytes sent. A viewer that goes away ends the stream (`onEarlyEnd` is told).
 */
export async function streamRepresentation(
  request: IncomingMessage,
  response: ServerResponse,
  headers: OutgoingHttpHeaders,
  size: number,
  open: (window: ByteWindow) => Readable,
  onEarlyEnd: (error: unknown) => void,
  refusalHeaders: OutgoingHttpHeaders = {},
): Promise<number> {
  const { window, sent } = startRepresentation(request, response, headers, size, refusalHeaders);
  if (!window) return sent;
  let streamed = 0;
  const stream = open(window);
  stream.on("data", (chunk: Buffer) => {
    streamed += chunk.length;
  });
  try {
    await pipeline(stream, response);
  } catch (error) {
    onEarlyEnd(error);
    response.destroy();
  }
  return streamed;
}

const flatCache = new WeakMap<CachedObject, string[]>();

/** A stored object's headers (without Content-Length) as name, value, name, value... */
function flatHeaders(object: CachedObject): string[] {
  let flat = flatCache.get(object);
  if (!flat) {
    flat = [];
    for (const [name, value] of Object.entries(object.headers)) {
      if (value === undefined || name === "content-length") continue;
      for (const one of Array.isArray(value) ? value : [value]) flat.push(name, String(one));
    }
    flatCache.set(object, flat);
  }
  return flat;
}

/**
 * Sends an object of the edge cache (from cache or just fetched) with its `Age` and `X-Cache`.
 * `requestId` is given when the response has no `X-Request-Id` yet: the common case then writes
 * every header in one flat list, which is `writeHead`'s fast path (headers set before take its slow one).
 */
export function sendCachedObject(
  request: IncomingMessage,
  response: ServerResponse,
  object: CachedObject,
  cacheStatus: "HIT" | "MISS",
  age: number,
  resolved: Resolved,
  requestId?: string,
): number {
  const head = request.method === "HEAD";
  const conditions = request.headers;
  if (
    object.status === 200 &&
    conditions.range === undefined &&
    conditions["if-none-match"] === undefined &&
    conditions["if-modified-since"] === undefined &&
    conditions["if-match"] === undefined &&
    conditions["if-unmodified-since"] === undefined
  ) {
    // The common case, kept cheap: the stored headers as a flat list plus the per-answer ones.
    const headers = [
      ...flatHeaders(object),
      "age",
      String(age),
      "x-cache",
      cacheStatus,
      "accept-ranges",
      "bytes",
      "content-length",
      String(object.body.length),
    ];
    if (requestId !== undefined) headers.push("x-request-id", requestId);
    response.writeHead(200, headers);
    response.end(head ? undefined : object.body);
    return head ? 0 : object.body.length;
  }
  if (requestId !== undefined) response.setHeader("x-request-id", requestId);
  const headers: OutgoingHttpHeaders = { ...object.headers, age: String(age), "x-cache": cacheStatus };
  if (object.status === 200) {
    headers["accept-ranges"] = "bytes";
    return sendRepresentation(request, response, headers, object.body, {
      age: String(age),
      "x-cache": cacheStatus,
    });
  }
  // Other statuses are sent as stored (a redirect's target put under a path-style prefix): no
  // ranges, no 304, no 412 (RFC 9110 13.2.1: preconditions apply only to what would be a 2xx).
  const redirected = viewerRedirect(headers, resolved);
  const size = object.body.length;
  const bodyless = head || object.status === 204 || object.status === 304;
  // A 204 has no Content-Length at all (RFC 9110, 8.6).
  response.writeHead(
    object.status,
    object.status === 204 ? redirected : { ...redirected, "content-length": size },
  );
  response.end(bodyless ? undefined : object.body);
  return bodyless ? 0 : size;
}
