import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { FastifyBaseLogger } from "fastify";
import type { Resolved } from "./cache-policy.ts";
import { notModified, preconditionFailed, viewerRedirect } from "./http.ts";
import { type ByteWindow, sendNotModified, sendPreconditionFailed, startRepresentation } from "./serving.ts";

/** What one viewer response (or a background revalidation, which has none) did, for analytics. */
export interface Exchange {
  sent: number;
  upstream: number;
  originMs: number | undefined;
  /**
   * For metrics: the answer's `X-Cache`, or `MEDIA` for a library distribution's answer (its `X-Cache`
   * is `MISS`, but the edge never caches it, so it is no miss a cache could have served); unset for
   * errors.
   */
  cacheStatus?: "HIT" | "MISS" | "MEDIA";
}

/** An origin answer the edge does not keep: streamed through to one viewer. */
export interface PassingAnswer {
  status: number;
  /** End-to-end headers. */
  headers: OutgoingHttpHeaders;
  body: NodeJS.ReadableStream & { destroy(): void };
  /** Chunks already read from `body` before the edge decided not to keep it. */
  already: Buffer[];
  /** `performance.now()` when the origin was asked: origin time runs until its body is through. */
  askedAt: number;
  /** Whole seconds the answer had spent in caches before the origin sent it (its `Age`). */
  age: number;
}

function ignore(): void {}

/** Lets go of an origin answer's body unread: its "aborted" error, with no listener, would end the process. */
export function discardBody(body: PassingAnswer["body"]): void {
  body.on("error", ignore);
  body.destroy();
}

/**
 * Streams an origin answer through without keeping it. A 200 to a GET or HEAD gets the viewer's
 * conditional handling, and with a known length its Range handling (the range is cut out of the
 * stream); anything else (an `OPTIONS` answer too) goes as is.
 */
export async function relay(
  request: IncomingMessage,
  response: ServerResponse,
  answer: PassingAnswer,
  exchange: Exchange,
  logger: FastifyBaseLogger,
  resolved: Resolved,
): Promise<void> {
  const { status, headers, body } = answer;
  const cacheHeaders = { age: String(answer.age), "x-cache": "MISS" };
  const out: OutgoingHttpHeaders = { ...headers, ...cacheHeaders };
  const declared = Number(headers["content-length"] ?? Number.NaN);
  let window: ByteWindow | undefined;
  const representation = status === 200 && (request.method === "GET" || request.method === "HEAD");
  // Without a length no range can be cut, but the viewer's conditions still hold: the origin never
  // sees them (the edge asks for the whole object, as for any miss).
  const unsized = representation && Number.isNaN(declared);
  if (unsized && preconditionFailed(request.headers, out)) {
    discardBody(body);
    exchange.sent = sendPreconditionFailed(response, cacheHeaders);
    return;
  }
  if (unsized && notModified(request.headers, out)) {
    discardBody(body);
    sendNotModified(response, out);
    return;
  }
  if (representation && !unsized) {
    out["accept-ranges"] = "bytes";
    const started = startRepresentation(request, response, out, declared, cacheHeaders);
    exchange.sent = started.sent;
    if (!started.window) {
      discardBody(body);
      return;
    }
    window = started.window;
  } else {
    response.writeHead(status, viewerRedirect(out, resolved));
    if (request.method === "HEAD" || status === 204 || status === 304) {
      discardBody(body);
      response.end();
      return;
    }
  }

  let skip = window?.start ?? 0;
  let remaining = window ? window.end - window.start + 1 : Number.POSITIVE_INFINITY;
  const cut = (chunk: Buffer): Buffer | undefined => {
    let piece = chunk;
    if (skip > 0) {
      const dropped = Math.min(skip, piece.length);
      skip -= dropped;
      piece = piece.subarray(dropped);
    }
    if (piece.length > remaining) piece = piece.subarray(0, remaining);
    remaining -= piece.length;
    return piece.length > 0 ? piece : undefined;
  };
  for (const chunk of answer.already) {
    const piece = cut(chunk);
    if (piece) {
      exchange.sent += piece.length;
      response.write(piece);
    }
  }
  let upstreamDone = false;
  const meter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      exchange.upstream += chunk.length;
      const piece = cut(chunk);
      if (piece) exchange.sent += piece.length;
      callback(null, piece);
    },
  });
  try {
    await pipeline(
      body,
      meter,
      async function* (source: AsyncIterable<Buffer>) {
        for await (const chunk of source) {
          yield chunk;
          // The viewer's range is complete: stop reading the origin.
          if (remaining <= 0) break;
        }
        upstreamDone = true;
      },
      response,
    );
  } catch (error) {
    if (!upstreamDone) logger.debug({ err: error }, "edge stream ended early");
    response.destroy();
  } finally {
    exchange.originMs = performance.now() - answer.askedAt;
    discardBody(body);
  }
}
