import {
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
} from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { Readable } from "node:stream";
import type { FastifyBaseLogger } from "fastify";
import { LRUCache } from "lru-cache";
import { type Agent, request as undiciRequest } from "undici";
import type { Clock } from "../../clock.ts";
import type { Config } from "../../config.ts";
import {
  assertTargetAllowed,
  BlockedAddressError,
  createGuardedAgent,
  guardedLookup,
} from "../../net/address-guard.ts";
import type { DistributionRow } from "../tables.ts";
import type { CachedObject, EdgeCache } from "./cache.ts";
import type { EdgeCachePolicy, Resolved } from "./cache-policy.ts";
import {
  cdnLoopNames,
  combinedHeaders,
  conditionalOutcome,
  connectionNames,
  endToEndHeaders,
  type HeaderMap,
  newCdnLoopName,
  viaAppended,
} from "./http.ts";
import type { Exchange, PassingAnswer } from "./relay.ts";

/**
 * Request headers passed to the origin. `Origin` lets an origin answer CORS for the site asking (a
 * player on another site reads playlists and segments with fetch); it names a site, no credential.
 * The `Access-Control-Request-*` pair is what a CORS preflight asks the origin to allow.
 */
const FORWARDED_REQUEST_HEADERS = [
  "accept",
  "accept-encoding",
  "accept-language",
  "user-agent",
  "referer",
  "origin",
  "access-control-request-method",
  "access-control-request-headers",
];

/** The `Age` an origin answer came with (a cache in front of the origin), in whole seconds. */
const originAge = (headers: HeaderMap): number =>
  Math.max(0, Number.parseInt(String(headers.age ?? "0"), 10) || 0);

const isTimeout = (error: unknown): boolean => {
  const code = (error as { code?: string } | null)?.code ?? "";
  return (
    code === "UND_ERR_HEADERS_TIMEOUT" ||
    code === "UND_ERR_BODY_TIMEOUT" ||
    code === "UND_ERR_CONNECT_TIMEOUT" ||
    code === "ETIMEDOUT" ||
    (error as Error | null)?.name === "TimeoutError"
  );
};

/** The origin URL of a path; undefined when dot segments would climb out of the origin's base path. */
function originUrl(distribution: DistributionRow, pathAndQuery: string): URL | undefined {
  const base = new URL(distribution.origin_url);
  const basePath = base.pathname.replace(/\/+$/, "");
  let target: URL;
  try {
    target = new URL(`${base.origin}${basePath}${pathAndQuery}`);
  } catch {
    return undefined;
  }
  return target.pathname === basePath || target.pathname.startsWith(`${basePath}/`) ? target : undefined;
}

/** One viewer's miss: the request, what it resolved to, and the analytics of its response. */
export interface Miss {
  request: IncomingMessage;
  resolved: Resolved;
  exchange: Exchange;
  /** Ends the origin request early (a background revalidation when the edge shuts down). */
  signal?: AbortSignal;
  /** The viewer's request id (`X-Request-Id`), for the log; none for a background revalidation. */
  requestId?: string;
}

/** How long an origin's failures are logged once: a dead origin under load would write a line per viewer. */
const FAILURE_LOG_WINDOW_MS = 60_000;
/** Distributions whose failures are remembered for that window; past it, the least recent are forgotten (and may log again). */
const MAX_FAILURE_LOG_ENTRIES = 10_000;

/** What the origin gave for a miss, and whether viewers waiting on the same miss may be given it too. */
export type Fetched =
  | { kind: "object"; object: CachedObject; cacheStatus: "HIT" | "MISS"; shared: boolean }
  /** Not kept (not storable or too large): streamed to this viewer only. */
  | { kind: "pass"; answer: PassingAnswer }
  | { kind: "error"; status: 404 | 502 | 504 };

/** A byte range asked of the origin on a viewer's behalf. */
interface RangeAsk {
  range: string;
  ifRange?: string;
}

/** One byte range as RFC 9110 spells it: `a-b`, `a-` or `-n`. */
const ONE_RANGE = /^\s*bytes\s*=\s*(\d+-\d*|-\d+)\s*$/i;

/** A GET viewer's one byte range of a 200, as it asked for it (with its `If-Range`). */
function viewerRange(request: IncomingMessage, status: number): RangeAsk | undefined {
  const match = ONE_RANGE.exec(request.headers.range ?? "");
  if (request.method !== "GET" || status !== 200 || !match) return undefined;
  const ifRange = request.headers["if-range"];
  return { range: `bytes=${match[1]}`, ...(typeof ifRange === "string" ? { ifRange } : {}) };
}

/** An origin answer's body: undici's, or node:http's given the same `dump` (let go of it unread). */
type OriginBody = Readable & { dump(): Promise<unknown> };

type Asked =
  | { kind: "answer"; status: number; headers: HeaderMap; body: OriginBody }
  | { kind: "failed"; error: unknown };

/**
 * undici's refusal of a `100 Continue` it did not ask for (the edge sends no `Expect`): it closes the
 * connection with "bad response" and drops the final answer that follows.
 */
const isUnsolicitedContinue = (error: unknown): boolean =>
  (error as { code?: string } | null)?.code === "UND_ERR_SOCKET" &&
  (error as Error).message === "bad response";

/**
 * The connection ended before any answer to the request came: an origin may close a kept-alive
 * connection at the moment a request goes out on it (its idle timeout, a restart), which says nothing
 * about the origin's health.
 */
const isClosedBeforeAnswer = (error: unknown): boolean => {
  const code = (error as { code?: string } | null)?.code;
  return (
    code === "ECONNRESET" || code === "EPIPE" || (code === "UND_ERR_SOCKET" && !isUnsolicitedContinue(error))
  );
};

/** Methods the edge sends (GET, or a viewer's OPTIONS) that are safe to send twice. */
const REPEATABLE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * How long an origin that sent an unsolicited `100 Continue` is asked through node:http straight away,
 * and how many such origins are remembered (least recently seen forgotten first).
 */
const INTERIM_SENDER_TTL_MS = 10 * 60_000;
const MAX_INTERIM_SENDERS = 10_000;

/**
 * node:http's connections to such origins are kept alive as undici's are: an idle one is closed after
 * undici's default keep-alive timeout (4 s, shorter than origins' usual 5 s or more; a shorter
 * `Keep-Alive: timeout` an origin announces is honoured). As undici's, they are not bounded per origin
 * (a miss never waits for another's connection, which its origin timeout would not cover); the idle
 * ones kept are. `timeout` is the idle one's: each request's own origin timeout replaces it while it
 * connects and is answered.
 */
const INTERIM_SENDER_AGENT = {
  keepAlive: true,
  timeout: 4_000,
  maxFreeSockets: 32,
};

/** As much of an unwanted answer as undici's `dump` reads to keep its connection; a larger one is cut. */
const DRAIN_LIMIT_BYTES = 128 * 1024;

/**
 * Lets go of a node:http answer as undici's `dump` does: a rest announced (or found) larger than the
 * limit is cut, closing the connection; a smaller one is read to its end, and the connection goes back
 * to the pool.
 */
function letGo(incoming: IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    if (incoming.closed) return resolve();
    incoming.on("error", () => undefined).once("close", resolve);
    if (Number(incoming.headers["content-length"]) > DRAIN_LIMIT_BYTES) return incoming.destroy();
    let read = 0;
    incoming.on("data", (chunk: Buffer) => {
      read += chunk.length;
      if (read > DRAIN_LIMIT_BYTES) incoming.destroy();
    });
    incoming.resume();
  });
}

/**
 * Asks origins for misses: a stale copy is revalidated instead of downloaded again, a cacheable answer
 * that fits the object limit is read whole and stored, anything else is handed back to be streamed.
 */
export class OriginFetcher {
  readonly #agent: Agent;
  /** node:http's connections to origins that send unsolicited `100 Continue`, kept alive. */
  readonly #interimAgents = {
    http: new HttpAgent(INTERIM_SENDER_AGENT),
    https: new HttpsAgent(INTERIM_SENDER_AGENT),
  };
  readonly #lookup: ReturnType<typeof guardedLookup>;
  /**
   * This node's name in `CDN-Loop` (RFC 8586), sent with every origin request. A request that already
   * names it came back through an origin that leads to this edge. Per node, not per platform: one
   * Cumulo deployment may be another's origin, and a loop through several nodes still comes back to one.
   */
  readonly #cdnId = newCdnLoopName();
  /**
   * Origins (scheme, host and port) that sent a `100 Continue` nobody asked for: undici drops the
   * connection on it, so for a while they are asked through node:http at once rather than twice.
   */
  readonly #interimSenders: LRUCache<string, true>;
  /** Distributions whose origin failure was logged within the last minute. */
  readonly #failuresLogged: LRUCache<string, true>;

  constructor(
    private readonly config: Config,
    private readonly logger: FastifyBaseLogger,
    clock: Clock,
    private readonly cache: EdgeCache,
    private readonly policy: EdgeCachePolicy,
  ) {
    this.#interimSenders = new LRUCache<string, true>({
      max: MAX_INTERIM_SENDERS,
      ttl: INTERIM_SENDER_TTL_MS,
      perf: { now: () => clock.now().getTime() },
    });
    this.#failuresLogged = new LRUCache<string, true>({
      max: MAX_FAILURE_LOG_ENTRIES,
      ttl: FAILURE_LOG_WINDOW_MS,
      perf: { now: () => clock.now().getTime() },
    });
    this.#lookup = guardedLookup(config.originAllowPrivate);
    this.#agent = createGuardedAgent({
      allowPrivate: config.originAllowPrivate,
      connectTimeoutMs: config.edge.originTimeoutMs,
    });
  }

  close(): Promise<void> {
    this.#interimAgents.http.destroy();
    this.#interimAgents.https.destroy();
    return this.#agent.close().catch(() => undefined);
  }

  /** Whether this request has already passed through this node: asking the origin would loop. */
  loopsBack(request: IncomingMessage): boolean {
    return cdnLoopNames(request.headers).includes(this.#cdnId);
  }

  /** Fetches a miss; `stale` is the stored copy to revalidate (and to serve if the origin fails and allows it). */
  async fetch(miss: Miss, stale: CachedObject | undefined): Promise<Fetched> {
    const { request, resolved, exchange } = miss;
    const { distribution, pathAndQuery } = resolved;
    const target = originUrl(distribution, pathAndQuery);
    if (!target) return { kind: "error", status: 404 };
    // Read before asking: a purge that lands while the origin answers keeps this answer out of the cache.
    const epoch = this.cache.epoch(distribution.id);
    const askedAt = performance.now();
    let fallback = stale;
    let asked = await this.#ask(target, miss, stale);
    exchange.originMs = performance.now() - askedAt;

    if (asked.kind === "answer" && asked.status === 304 && stale) {
      await asked.body.dump().catch(() => undefined);
      const revalidation = this.policy.revalidated(stale, request, resolved, asked.headers);
      if (revalidation.kind === "personal") {
        this.cache.delete(distribution.id, pathAndQuery, request.headers);
        return { kind: "object", object: revalidation.object, cacheStatus: "MISS", shared: false };
      }
      if (revalidation.kind === "refreshed") {
        if (revalidation.storable) {
          this.cache.set(distribution.id, pathAndQuery, request.headers, revalidation.object, epoch);
        } else {
          this.cache.delete(distribution.id, pathAndQuery, request.headers);
        }
        return { kind: "object", object: revalidation.object, cacheStatus: "MISS", shared: true };
      }
      // The 304 does not fit the stored copy: ask again for the whole object.
      fallback = undefined;
      asked = await this.#ask(target, miss, undefined);
      exchange.originMs = performance.now() - askedAt;
    }

    if (asked.kind === "failed") return this.#failed(asked.error, fallback, miss);
    const { status, body } = asked;
    if (status >= 500 && fallback && this.policy.usableOnError(fallback)) {
      await body.dump().catch(() => undefined);
      return { kind: "object", object: fallback, cacheStatus: "HIT", shared: true };
    }
    const headers = endToEndHeaders(asked.headers);
    const { maxObjectBytes } = this.config.edge;
    let policy: ReturnType<EdgeCachePolicy["forResponse"]>;
    let storable: boolean;
    try {
      policy = this.policy.forResponse(request, resolved, status, asked.headers);
      storable = this.policy.mayStore(policy, asked.headers, maxObjectBytes);
    } catch (error) {
      // Whatever the answer's headers made of it, its connection is let go of.
      await body.dump().catch(() => undefined);
      throw error;
    }
    // The origin's Age (a cache in front of it), for an answer passed on rather than kept.
    const age = Math.floor(policy.age());
    if (!storable) {
      const range = this.#rangeWorthAsking(request, status, headers);
      if (!range) return { kind: "pass", answer: { status, headers, body, already: [], askedAt, age } };
      // The origin would send everything before the range only for it to be thrown away.
      return this.#askRange(miss, target, body, range, askedAt);
    }

    const chunks: Buffer[] = [];
    let size = 0;
    try {
      // Left open on a return: the rest of a body found too large is streamed through.
      for await (const chunk of body.iterator({ destroyOnReturn: false })) {
        const buffer = chunk as Buffer;
        exchange.upstream += buffer.length;
        size += buffer.length;
        chunks.push(buffer);
        // Larger than announced (or chunked): stop buffering and stream the rest through.
        if (size > maxObjectBytes) {
          // Without a length the edge cannot cut a range out of the stream (nor tell a range past
          // the end): the origin is asked for the viewer's range instead.
          const range = headers["content-length"] === undefined ? viewerRange(request, status) : undefined;
          if (range) return this.#askRange(miss, target, body, range, askedAt);
          return { kind: "pass", answer: { status, headers, body, already: chunks, askedAt, age } };
        }
      }
    } catch (error) {
      exchange.originMs = performance.now() - askedAt;
      return this.#failed(error, fallback, miss);
    }
    exchange.originMs = performance.now() - askedAt;
    // A body under 4 KiB comes from Node's shared buffer pool, whose 8 KiB slab it keeps alive while
    // cached (the cache may then hold up to about 1.9 times its bound in small objects); a body of its
    // own costs each hit of it 4-7 µs more (docs/performance.md, session 43).
    const object = this.policy.cachedObject(status, headers, Buffer.concat(chunks, size), policy);
    this.cache.set(distribution.id, pathAndQuery, request.headers, object, epoch);
    return { kind: "object", object, cacheStatus: "MISS", shared: true };
  }

  /**
   * Asks the origin with the viewer's own method, for a request the cache has no part in (`OPTIONS`,
   * a browser's CORS preflight, whose answer depends on the site asking): its answer is handed back
   * unread, never kept, never shared.
   */
  async pass(miss: Miss): Promise<Fetched> {
    const { distribution, pathAndQuery } = miss.resolved;
    const target = originUrl(distribution, pathAndQuery);
    if (!target) return { kind: "error", status: 404 };
    const askedAt = performance.now();
    const asked = await this.#ask(target, miss, undefined, undefined, miss.request.method);
    miss.exchange.originMs = performance.now() - askedAt;
    if (asked.kind === "failed") return this.#failed(asked.error, undefined, miss);
    const headers = endToEndHeaders(asked.headers);
    const answer = { headers, body: asked.body, already: [], askedAt, age: originAge(asked.headers) };
    return { kind: "pass", answer: { ...answer, status: asked.status } };
  }

  /** 504 for a timeout, else 502; a stale copy the origin allowed for errors (RFC 5861) instead. */
  #failed(error: unknown, fallback: CachedObject | undefined, miss: Miss): Fetched {
    const status = isTimeout(error) ? 504 : 502;
    const { distribution } = miss.resolved;
    // Once a minute per distribution: the request id a viewer reports, and which origin failed
    // (before the QA of session 48 the edge logged nothing, not even at warn).
    if (!this.#failuresLogged.has(distribution.id)) {
      this.#failuresLogged.set(distribution.id, true);
      this.logger.warn(
        {
          reqId: miss.requestId,
          distribution: distribution.id,
          host: distribution.hostname,
          err: error,
          status,
        },
        `origin ${error instanceof BlockedAddressError ? "not asked: its address is a private one (CUMULO_ORIGIN_ALLOW_PRIVATE)" : status === 504 ? "timed out" : "unreachable"}; answered ${status} (further failures of this distribution are not logged for a minute)`,
      );
    }
    if (fallback && this.policy.usableOnError(fallback)) {
      return { kind: "object", object: fallback, cacheStatus: "HIT", shared: true };
    }
    return { kind: "error", status };
  }

  /**
   * Lets the origin's first answer go unread and asks for `range` instead; the origin's answer (a
   * 206, a 416, or a 200 from an origin that ignores ranges) is passed on as it comes.
   */
  async #askRange(
    miss: Miss,
    target: URL,
    unread: Readable,
    range: RangeAsk,
    askedAt: number,
  ): Promise<Fetched> {
    unread.on("error", () => undefined);
    unread.destroy();
    const ranged = await this.#ask(target, miss, undefined, range);
    miss.exchange.originMs = performance.now() - askedAt;
    if (ranged.kind === "failed") return this.#failed(ranged.error, undefined, miss);
    const answer = {
      headers: endToEndHeaders(ranged.headers),
      already: [],
      askedAt,
      age: originAge(ranged.headers),
    };
    return { kind: "pass", answer: { ...answer, status: ranged.status, body: ranged.body } };
  }

  /**
   * The range to ask the origin for instead of streaming its whole answer: a GET's one range, not
   * from the start, of a 200 too large to keep (a seek in a progressive video), with the viewer's
   * `If-Range` if it holds for this answer.
   */
  #rangeWorthAsking(
    request: IncomingMessage,
    status: number,
    headers: OutgoingHttpHeaders,
  ): RangeAsk | undefined {
    const declared = Number(headers["content-length"] ?? Number.NaN);
    if (status !== 200 || !(declared > this.config.edge.maxObjectBytes)) return undefined;
    const outcome = conditionalOutcome(request.method, request.headers, headers, declared);
    if (outcome.kind !== "range" || outcome.start === 0) return undefined;
    const ifRange = request.headers["if-range"];
    return {
      range: `bytes=${outcome.start}-${outcome.end}`,
      ...(typeof ifRange === "string" ? { ifRange } : {}),
    };
  }

  /**
   * One origin request (a GET unless `method` says otherwise); conditional when a stored copy has a
   * validator, ranged when `range` is given.
   */
  async #ask(
    target: URL,
    { request, resolved, signal }: Miss,
    stale: CachedObject | undefined,
    range?: RangeAsk,
    method = "GET",
  ): Promise<Asked> {
    const headers: Record<string, string> = {};
    // What the viewer's Connection header names was meant for the edge alone.
    const hopByHop = connectionNames(request.headers.connection);
    const viewerHeader = (name: string): string | undefined => {
      const value = request.headers[name];
      return typeof value === "string" && !hopByHop.includes(name) ? value : undefined;
    };
    for (const name of FORWARDED_REQUEST_HEADERS) {
      const value = viewerHeader(name);
      if (value !== undefined) headers[name] = value;
    }
    const forwardedFor = viewerHeader("x-forwarded-for");
    const client = request.socket.remoteAddress ?? "";
    headers["x-forwarded-for"] = forwardedFor ? `${forwardedFor}, ${client}` : client;
    headers["x-forwarded-host"] = resolved.distribution.hostname;
    headers.via = viaAppended(viewerHeader("via"), request.httpVersion);
    const cdnLoop = viewerHeader("cdn-loop");
    headers["cdn-loop"] = cdnLoop ? `${cdnLoop}, ${this.#cdnId}` : this.#cdnId;
    const etag = stale?.headers.etag;
    const lastModified = stale?.headers["last-modified"];
    if (typeof etag === "string") headers["if-none-match"] = etag;
    else if (typeof lastModified === "string") headers["if-modified-since"] = lastModified;
    if (range) {
      headers.range = range.range;
      if (range.ifRange) headers["if-range"] = range.ifRange;
    }
    const { originTimeoutMs } = this.config.edge;
    try {
      assertTargetAllowed(target, this.config.originAllowPrivate);
      if (this.#interimSenders.has(target.origin)) {
        return await this.#askSkippingInterim(target, method, headers, signal);
      }
      const send = () =>
        undiciRequest(target, {
          method,
          headers,
          dispatcher: this.#agent,
          headersTimeout: originTimeoutMs,
          bodyTimeout: originTimeoutMs,
          signal,
        });
      // Asked again once, on a new connection (the failed one is gone from the pool), as browsers and
      // nginx do for a kept-alive connection that fails: otherwise an origin's idle timeout that
      // meets a request is a 502 to the viewer.
      const answer = await send().catch((error: unknown) => {
        if (!isClosedBeforeAnswer(error) || !REPEATABLE_METHODS.has(method) || signal?.aborted) throw error;
        return send();
      });
      // RFC 9110 (15) has status codes from 100 to 599: another (999) is no answer to pass on, and was
      // counted in none of analytics' classes (QA of 4 December). The viewer gets the edge's 502.
      if (answer.statusCode > 599) {
        await answer.body.dump().catch(() => undefined);
        return { kind: "failed", error: new Error(`the origin answered status ${answer.statusCode}`) };
      }
      return {
        kind: "answer",
        status: answer.statusCode,
        headers: combinedHeaders(answer.headers as HeaderMap),
        body: answer.body,
      };
    } catch (error) {
      // RFC 9110 (15.2) has a client skip interim answers it did not expect and read the final one:
      // the request (a GET or OPTIONS, safe to repeat) is sent once more through node:http, which does,
      // as the origin's next requests will be for a while.
      if (isUnsolicitedContinue(error)) {
        this.#interimSenders.set(target.origin, true);
        return this.#askSkippingInterim(target, method, headers, signal);
      }
      return { kind: "failed", error };
    }
  }

  /**
   * One origin request through node:http, which skips 1xx answers before the final one (undici
   * refuses a `100 Continue`), through the same address guard and origin timeout (for each pause, as
   * undici's). Connections are kept alive per origin (host, port and TLS server name): the guard ran
   * when each was opened, to the same origin.
   */
  #askSkippingInterim(
    target: URL,
    method: string,
    headers: Record<string, string>,
    signal: AbortSignal | undefined,
  ): Promise<Asked> {
    const secure = target.protocol === "https:";
    const send = secure ? httpsRequest : httpRequest;
    const once = (firstTry: boolean) =>
      new Promise<Asked>((resolve) => {
        const options = {
          method,
          headers,
          agent: secure ? this.#interimAgents.https : this.#interimAgents.http,
          lookup: this.#lookup,
          timeout: this.config.edge.originTimeoutMs,
          signal,
        };
        const outgoing = send(target, options, (incoming) => {
          const body = Object.assign(incoming, { dump: () => letGo(incoming) });
          const status = incoming.statusCode ?? 0;
          resolve({ kind: "answer", status, headers: combinedHeaders(incoming.headers), body });
        });
        outgoing.on("timeout", () => {
          outgoing.destroy(Object.assign(new Error("origin timeout"), { code: "ETIMEDOUT" }));
        });
        outgoing.on("error", (error) => {
          // As through undici (`#ask`): a kept-alive connection closed under the request is tried once more.
          const again =
            firstTry &&
            outgoing.reusedSocket &&
            isClosedBeforeAnswer(error) &&
            REPEATABLE_METHODS.has(method);
          resolve(again && !signal?.aborted ? once(false) : { kind: "failed", error });
        });
        outgoing.end();
      });
    return once(true);
  }
}
