import { createHmac } from "node:crypto";
import { EventEmitter } from "node:events";
import { LRUCache } from "lru-cache";
import type { Agent } from "undici";
import { request } from "undici";
import { assertTargetAllowed, createGuardedAgent } from "../net/address-guard.ts";

export interface OutgoingDelivery {
  url: string;
  /** The message id: `webhook-id`, the same on every attempt. */
  messageId: string;
  body: string;
  secret: string;
  /** The secret before a rotation with an overlap, until it expires: it signs too, after `secret`. */
  previousSecret?: string;
  headers: Record<string, string> | null;
}

export interface DeliveryOutcome {
  success: boolean;
  /** The receiver's status; 0 when no HTTP answer came (refused, unreachable, timed out). */
  status: number;
  /** At most the first `maxResponseBytes` of the answer, as text. */
  body: string;
  error: string | null;
  durationMs: number;
  /** `Retry-After` of a 429/503 answer, as sent. */
  retryAfter: string | undefined;
}

export interface SenderOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  maxResponseBytes: number;
  userAgent: string;
}

/**
 * Headers the signature and the transport own; an endpoint's custom headers never replace them. Names are
 * compared lower-cased with `_` read as `-`: CGI-style receivers (PHP, Rack, WSGI) take `Webhook_Signature`
 * for `webhook-signature`.
 */
const RESERVED_HEADERS = new Set([
  "webhook-id",
  "webhook-timestamp",
  "webhook-signature",
  "content-type",
  "content-length",
  "host",
  "user-agent",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "upgrade",
  "expect",
  "te",
  "trailer",
]);

/**
 * The Standard Webhooks signature: `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under the
 * key the `whsec_` secret encodes. Computed with node:crypto rather than the standardwebhooks package,
 * whose SHA-256 in JavaScript was about 5% of a delivery's CPU; the tests verify it with that package.
 */
function signature(secret: string, messageId: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64");
  return `v1,${createHmac("sha256", key).update(`${messageId}.${timestamp}.${body}`).digest("base64")}`;
}

export function signedHeaders(
  delivery: OutgoingDelivery,
  at: Date,
  userAgent: string,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(delivery.headers ?? {})) {
    if (!RESERVED_HEADERS.has(name.toLowerCase().replaceAll("_", "-"))) headers[name] = value;
  }
  headers["content-type"] = "application/json";
  headers["user-agent"] = userAgent;
  headers["webhook-id"] = delivery.messageId;
  const timestamp = Math.floor(at.getTime() / 1000);
  headers["webhook-timestamp"] = String(timestamp);
  // Standard Webhooks lists signatures space-separated; a receiver accepts the delivery if one matches.
  const current = signature(delivery.secret, delivery.messageId, timestamp, delivery.body);
  headers["webhook-signature"] =
    delivery.previousSecret === undefined
      ? current
      : `${current} ${signature(delivery.previousSecret, delivery.messageId, timestamp, delivery.body)}`;
  return headers;
}

const describe = (error: unknown): string => {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  if (cause instanceof Error && cause.message && cause.message !== error.message) return cause.message;
  return error.message;
};

/**
 * Endpoint URLs whose parsed form and address check are kept: about 7 KB each at the longest URL an
 * endpoint may have (2,048 characters; QA of session 56), a few hundred bytes for most.
 */
const TARGETS_KEPT = 1_000;

/** Sends one signed attempt with undici through the SSRF-guarded agent; never follows redirects. */
export class WebhookSender {
  readonly #agent: Agent;
  /**
   * Each endpoint URL parsed and checked once, not at every attempt (the check of a literal IP's
   * range parses the address): what it gave, the URL to send to or why not. Names are still checked
   * at every connection, by the agent's lookup.
   */
  readonly #targets = new LRUCache<string, { url: URL } | { refused: string }>({ max: TARGETS_KEPT });

  constructor(private readonly options: SenderOptions) {
    this.#agent = createGuardedAgent({
      allowPrivate: options.allowPrivate,
      connectTimeoutMs: options.timeoutMs,
    });
  }

  async send(delivery: OutgoingDelivery, at: Date): Promise<DeliveryOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const failure = (error: string): DeliveryOutcome => ({
      success: false,
      status: 0,
      body: "",
      error,
      durationMs: elapsed(),
      retryAfter: undefined,
    });
    const target = this.#target(delivery.url);
    if ("refused" in target) return failure(target.refused);
    // The whole attempt's timeout: a timer and an EventEmitter, which undici takes as its abort signal.
    // `AbortSignal.timeout` cost about 10 µs of CPU per attempt more (its EventTarget listeners), a
    // sixth of a send (docs/performance.md, session 12).
    const abort = new EventEmitter();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      abort.emit("abort");
    }, this.options.timeoutMs);
    timer.unref();
    try {
      const response = await request(target.url, {
        method: "POST",
        dispatcher: this.#agent,
        headers: signedHeaders(delivery, at, this.options.userAgent),
        body: delivery.body,
        signal: abort,
      });
      const body = await this.#readCapped(response.body);
      const status = response.statusCode;
      const retryAfter = response.headers["retry-after"];
      const success = status >= 200 && status < 300;
      let error: string | null = null;
      if (status >= 300 && status < 400) error = `redirect (${status}) not followed`;
      return {
        success,
        status,
        body,
        error,
        durationMs: elapsed(),
        retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
      };
    } catch (error) {
      if (timedOut) return failure(`timed out after ${this.options.timeoutMs} ms`);
      return failure(describe(error));
    } finally {
      clearTimeout(timer);
    }
  }

  /** The URL to send to, parsed and checked once per endpoint URL, or why it is refused. */
  #target(address: string): { url: URL } | { refused: string } {
    let target = this.#targets.get(address);
    if (!target) {
      try {
        const url = new URL(address);
        assertTargetAllowed(url, this.options.allowPrivate);
        target = { url };
      } catch (error) {
        target = { refused: describe(error) };
      }
      this.#targets.set(address, target);
    }
    return target;
  }

  /** Keeps the first bytes of the answer and stops reading there. */
  async #readCapped(stream: AsyncIterable<Uint8Array> & { destroy(): void }): Promise<string> {
    const limit = this.options.maxResponseBytes;
    const chunks: Uint8Array[] = [];
    let size = 0;
    for await (const chunk of stream) {
      const room = limit - size;
      chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
      size += Math.min(chunk.length, room);
      if (size >= limit) {
        stream.destroy();
        break;
      }
    }
    // A character cut at the limit is left out (streaming decode holds back its first bytes) rather than
    // replaced by U+FFFD, which would take the text past the limit. PostgreSQL text cannot hold NUL
    // characters; a binary answer is kept as readable text without them.
    return new TextDecoder().decode(Buffer.concat(chunks), { stream: true }).replaceAll("\u0000", "");
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }
}
