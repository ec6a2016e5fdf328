import type { IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { FastifyBaseLogger } from "fastify";
import { BlobStoreUnavailableError, STORAGE_RETRY_AFTER_S } from "../../blobs/store.ts";
import type { Bus } from "../../bus.ts";
import type { Clock } from "../../clock.ts";
import type { Config } from "../../config.ts";
import { createBoundedServer, drainConnections, stopListening } from "../../http/listener.ts";
import { requestId } from "../../http/request-id.ts";
import type { Metrics } from "../../ops/metrics.ts";
import { isStoreUnavailable, STORE_RETRY_AFTER_S } from "../../store/unavailable.ts";
import type { TrafficRecorder } from "../analytics.ts";
import { type CdnService, DISTRIBUTION_CHANNEL, type DistributionChange } from "../service.ts";
import type { DistributionRow } from "../tables.ts";
import { type CachedObject, EdgeCache } from "./cache.ts";
import { EdgeCachePolicy, type Resolved } from "./cache-policy.ts";
import { MissCoalescer } from "./coalescing.ts";
import { DiskTier } from "./disk-tier.ts";
import { HostResolver } from "./host-resolution.ts";
import type { MediaOrigin } from "./media-origin.ts";
import { type Fetched, type Miss, OriginFetcher } from "./origin-fetch.ts";
import { discardBody, type Exchange, relay } from "./relay.ts";
import { sendCachedObject, sendJsonError } from "./serving.ts";

/** What a coalesced miss gives the viewers that waited on it. */
type SharedResult =
  /**
   * `HIT`: the stale copy the origin allows while it fails (`stale-if-error`, never a varying one),
   * labelled for the waiting viewers as for the one that led the fetch.
   */
  | { kind: "object"; object: CachedObject; cacheStatus: "HIT" | "MISS" }
  | { kind: "error"; status: number }
  /** Nothing shareable (not cacheable or too large): each waiting viewer asks the origin itself. */
  | { kind: "pass" };

/** What viewers waiting on the same miss get of an origin's answer. */
function sharedResult(fetched: Fetched): SharedResult {
  if (fetched.kind === "object")
    return fetched.shared
      ? { kind: "object", object: fetched.object, cacheStatus: fetched.cacheStatus }
      : { kind: "pass" };
  return fetched.kind === "error" ? { kind: "error", status: fetched.status } : { kind: "pass" };
}

/** The stored copy to revalidate with a conditional request (the same variant, a 200), if any. */
const revalidatable = (stored: CachedObject | undefined): CachedObject | undefined =>
  stored && !stored.varies && stored.status === 200 ? stored : undefined;

const HTTP_ORIGIN = /^https?:\/\//i;

const ERROR_MESSAGES: Record<number, string> = {
  404: "Resource not found",
  405: "Method Not Allowed",
  500: "Internal server error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
  508: "Loop Detected",
};

/** The cache headers of an error answered after asking the origin: it was a miss like any other. */
const MISSED: OutgoingHttpHeaders = { age: "0", "x-cache": "MISS" };

function sendError(response: ServerResponse, status: number, headers: OutgoingHttpHeaders = {}): number {
  return sendJsonError(
    response,
    status,
    { success: false, message: ERROR_MESSAGES[status] ?? "Error" },
    headers,
  );
}

/** Header names as a preflight asks for them: tokens separated by commas (RFC 9110). */
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(\s*,\s*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/;

/**
 * A browser's CORS preflight for a library's files: players on any site may read them (their GET
 * answers carry `Access-Control-Allow-Origin: *`), and one that sends a header a simple request may
 * not (a `Range` some browsers do not count as simple, a player's own header) asks first. Nothing is
 * read or refused here: the library's rules apply to the GET that follows.
 */
function answerPreflight(request: IncomingMessage, response: ServerResponse): number {
  const asked = request.headers["access-control-request-headers"]?.trim() ?? "";
  response.writeHead(204, {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "GET, HEAD, OPTIONS",
    ...(asked && asked.length <= 1024 && HEADER_LIST.test(asked)
      ? { "access-control-allow-headers": asked }
      : {}),
    "access-control-max-age": "86400",
    vary: "access-control-request-headers",
  });
  response.end();
  return 0;
}

export interface EdgeDeps {
  config: Config;
  logger: FastifyBaseLogger;
  bus: Bus;
  clock: Clock;
  cdn: CdnService;
  traffic: TrafficRecorder;
  metrics: Metrics;
  /** Serves `media://` (library) distributions; without it the edge answers 404 for them. */
  mediaOrigin?: MediaOrigin;
}

/**
 * The CDN edge: picks the distribution by Host (or path prefix), serves GET/HEAD from a byte-bounded
 * memory cache or the origin (RFC 9111 freshness), coalesces concurrent misses, passes OPTIONS (CORS
 * preflights) to the origin uncached, counts every response for analytics.
 */
export class EdgeServer {
  readonly cache: EdgeCache;
  readonly #server: Server;
  readonly #policy: EdgeCachePolicy;
  readonly #hosts: HostResolver;
  readonly #origins: OriginFetcher;
  readonly #misses = new MissCoalescer<SharedResult>({ kind: "pass" });
  #closed = false;
  /** Responses being written, told to close their connection when shutdown begins. */
  readonly #inFlight = new Set<ServerResponse>();
  /** Background revalidations under way (`stale-while-revalidate`), let go of at shutdown. */
  readonly #revalidations = new Set<Promise<void>>();
  readonly #stopping = new AbortController();
  #disk: DiskTier | undefined;

  constructor(private readonly deps: EdgeDeps) {
    this.cache = new EdgeCache(deps.config.edge.cacheBytes);
    this.#policy = new EdgeCachePolicy(deps.clock);
    if (deps.config.edge.diskCacheBytes > 0) {
      this.#disk = new DiskTier(
        join(deps.config.dataDir, "edge-cache"),
        deps.config.edge.diskCacheBytes,
        (id) => this.cache.epoch(id),
        (serialized) => this.#policy.restore(serialized),
      );
      this.cache.useDiskTier(this.#disk);
    }
    this.#hosts = new HostResolver(deps.cdn, deps.config, deps.clock);
    this.#origins = new OriginFetcher(deps.config, deps.logger, deps.clock, this.cache, this.#policy);
    this.#server = createBoundedServer(deps, (request, response) => {
      // While closing, keep-alive clients are told to reconnect (to another node) after this answer.
      if (this.#closed) response.shouldKeepAlive = false;
      try {
        const pending = this.#handle(request, response);
        if (!pending) return;
        // Only answers still pending can be under way when shutdown begins: a fresh hit is already
        // written by now, and is spared the tracking.
        this.#inFlight.add(response);
        response.once("close", () => this.#inFlight.delete(response));
        pending.catch((error: unknown) => this.#failed(response, error));
      } catch (error) {
        this.#failed(response, error);
      }
    });
    // A viewer that stops reading an answer streamed through would otherwise hold its connection,
    // and the origin's, for as long as it likes; one that reads slowly keeps moving bytes.
    this.#server.timeout = deps.config.edge.idleTimeoutMs;
  }

  async start(host: string, port: number): Promise<string> {
    for (const row of await this.deps.cdn.unservableDistributions()) {
      this.deps.logger.warn(
        { distribution: row.id, organization: row.organization_id, hostname: row.hostname },
        `distribution ${row.id} uses the reserved host name ${row.hostname}: the edge does not serve it`,
      );
    }
    await this.deps.cdn.purgeSync.serveEdge((message) =>
      this.cache.purge(message.distributionId, message.paths),
    );
    // Purges sent while this node was cut off from the others are lost: start from an empty cache.
    this.deps.bus.onReconnect(() => {
      this.#hosts.clear();
      this.cache.clear();
    });
    await this.deps.bus.subscribe(DISTRIBUTION_CHANNEL, (raw) => {
      const change = JSON.parse(raw) as DistributionChange;
      this.#hosts.forget(change.hostname);
      if (change.deleted) this.cache.forgetDistribution(change.id);
      else if (change.dropCache) this.cache.dropDistribution(change.id);
    });
    await this.deps.traffic.listen();
    this.deps.traffic.start();
    await new Promise<void>((resolve, reject) => {
      this.#server.once("error", reject);
      this.#server.listen(port, host, () => {
        this.#server.off("error", reject);
        resolve();
      });
    });
    const address = this.#server.address() as AddressInfo;
    const url = `http://${host.includes(":") ? `[${host}]` : host}:${address.port}`;
    this.deps.logger.info({ url }, "CDN edge listening");
    return url;
  }

  /** Stops taking connections, lets in-flight responses finish, then writes the last traffic counts. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    stopListening(this.#server);
    for (const response of this.#inFlight) if (!response.headersSent) response.shouldKeepAlive = false;
    await drainConnections(this.#server, this.deps.config.listener.shutdownGraceMs);
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#server.closeIdleConnections();
    await closed;
    // Viewers are all answered: a background revalidation still waiting on its origin is given up.
    this.#stopping.abort();
    await Promise.all(this.#revalidations);
    await this.#origins.close();
    this.#disk?.close();
    await this.deps.traffic.stop();
  }

  #failed(response: ServerResponse, error: unknown): void {
    // The media storage or the store down (a bucket in an outage, PostgreSQL restarting) is not this
    // node's fault: players may try again.
    const retryAfter =
      error instanceof BlobStoreUnavailableError
        ? STORAGE_RETRY_AFTER_S
        : isStoreUnavailable(error)
          ? STORE_RETRY_AFTER_S
          : undefined;
    if (retryAfter !== undefined)
      this.deps.logger.warn({ err: error }, "edge request failed: store or storage unavailable");
    else this.deps.logger.error({ err: error }, "edge request failed");
    if (response.headersSent) response.destroy();
    else if (retryAfter !== undefined) sendError(response, 503, { "retry-after": String(retryAfter) });
    else sendError(response, 500);
  }

  /**
   * Answers a request. A fresh in-memory copy for a remembered host is sent at once, without a
   * promise or a listener (the hot path); everything else continues in `#answer`.
   */
  #handle(request: IncomingMessage, response: ServerResponse): Promise<void> | undefined {
    const id = requestId(request);
    const resolved = this.#hosts.resolve(request);
    if (resolved instanceof Promise) {
      response.setHeader("x-request-id", id); // also on a 500 if the lookup fails
      return resolved.then((found) => this.#answer(request, response, id, found));
    }
    if (resolved && (request.method === "GET" || request.method === "HEAD")) {
      const { distribution, pathAndQuery } = resolved;
      if (distribution.status === "active" && HTTP_ORIGIN.test(distribution.origin_url)) {
        const cached = this.cache.get(distribution.id, pathAndQuery, request.headers);
        if (!(cached instanceof Promise) && cached && this.#policy.satisfies(cached, request, resolved)) {
          const age = this.#policy.age(cached);
          const sent = sendCachedObject(request, response, cached, "HIT", age, resolved, id);
          this.#count(distribution, response.statusCode, {
            sent,
            upstream: 0,
            originMs: undefined,
            cacheStatus: "HIT",
          });
          return undefined;
        }
        return this.#answer(request, response, id, resolved, { cached });
      }
    }
    return this.#answer(request, response, id, resolved);
  }

  #count(distribution: DistributionRow, status: number, exchange: Exchange): void {
    this.deps.metrics.edgeResponse(exchange.cacheStatus, exchange.sent, exchange.originMs);
    this.deps.traffic.record({
      distributionId: distribution.id,
      organizationId: distribution.organization_id,
      status,
      sentBytes: exchange.sent,
      upstreamBytes: exchange.upstream,
      originTimeMs: exchange.originMs,
    });
  }

  /** Everything but the hot path; `lookup` holds the cache lookup when `#handle` already made it. */
  async #answer(
    request: IncomingMessage,
    response: ServerResponse,
    id: string,
    resolved: Resolved | undefined,
    lookup?: { cached: ReturnType<EdgeCache["get"]> },
  ): Promise<void> {
    response.setHeader("x-request-id", id);
    if (!resolved) {
      this.deps.metrics.edgeResponse(undefined, sendError(response, 404), undefined);
      return;
    }
    const { distribution, pathAndQuery } = resolved;
    const exchange: Exchange = { sent: 0, upstream: 0, originMs: undefined };
    // A streamed answer's count is known once its pipeline settles, which can be after `close`.
    let answered: Promise<unknown> = Promise.resolve();
    response.once("close", () => {
      const count = () => this.#count(distribution, response.statusCode, exchange);
      void answered.then(count, count);
    });

    // Library distributions (media://) are answered by the media origin, which applies the library's
    // access rules on every request; their responses are never stored in the edge cache.
    const mediaLibrary = /^media:\/\/(.+)$/i.exec(distribution.origin_url)?.[1];
    const servable = mediaLibrary
      ? this.deps.mediaOrigin !== undefined
      : HTTP_ORIGIN.test(distribution.origin_url);
    if (distribution.status !== "active" || !servable) {
      exchange.sent = sendError(response, 404);
      return;
    }
    const miss: Miss = { request, resolved, exchange, requestId: id };
    if (request.method === "OPTIONS") {
      // A library's preflight is answered here, as its files are; a customer's origin answers its own
      // (it alone knows which sites, methods and headers it allows).
      if (mediaLibrary) exchange.sent = answerPreflight(request, response);
      else if (this.#origins.loopsBack(request)) exchange.sent = sendError(response, 508, MISSED);
      else await this.#deliver(miss, response, await this.#origins.pass(miss), () => undefined);
      return;
    }
    if (request.method !== "GET" && request.method !== "HEAD") {
      exchange.sent = sendError(response, 405, { allow: "GET, HEAD, OPTIONS" });
      return;
    }
    if (mediaLibrary && this.deps.mediaOrigin) {
      exchange.cacheStatus = "MEDIA";
      const askedAt = performance.now();
      const serving = this.deps.mediaOrigin.serve(request, response, mediaLibrary, pathAndQuery);
      answered = serving;
      try {
        exchange.sent = await serving;
      } catch (error) {
        // The edge's own error answer (media storage or the store failing, `#failed`), not the
        // library's: counted as an error, like a URL origin that cannot be reached.
        exchange.cacheStatus = undefined;
        throw error;
      }
      // The media store is these distributions' origin, and nothing of it is cached: every answer it
      // made (not a refusal) was fetched from it, as the analytics' ratio and origin time say.
      if (response.statusCode < 400) {
        exchange.upstream = exchange.sent;
        exchange.originMs = performance.now() - askedAt;
      }
      return;
    }

    const stored = await (lookup
      ? lookup.cached
      : this.cache.get(distribution.id, pathAndQuery, request.headers));
    if (stored && this.#policy.satisfies(stored, request, resolved)) {
      exchange.sent = this.#sendObject(miss, response, stored, "HIT");
      return;
    }
    // An origin that leads back to this edge would be asked again for every round, or (the same
    // path) the request would wait on its own fetch until the origin timeout.
    if (this.#origins.loopsBack(request)) {
      exchange.sent = sendError(response, 508, MISSED);
      return;
    }
    // Per variant (the key it is stored under), so that viewers of another variant of a path neither
    // wait on this one's fetch nor hold back its revalidation; per origin too: a viewer arriving after
    // the distribution's origin changed does not wait on a fetch from the old one; and per purge
    // count: a viewer arriving after a purge does not get a fetch started before it.
    const key = `${this.cache.variantKey(distribution.id, pathAndQuery, request.headers)}\n${distribution.origin_url}\n${this.cache.epoch(distribution.id)}`;
    // RFC 5861: a stale copy the origin lets be served while it is revalidated answers now.
    if (stored && this.#policy.servableWhileRevalidating(stored, request, resolved)) {
      exchange.sent = this.#sendObject(miss, response, stored, "HIT");
      this.#revalidateInBackground(key, miss, stored);
      return;
    }
    const pending = this.#misses.waitFor(key);
    if (!pending) {
      // A stale copy of the same variant is revalidated instead of downloaded again.
      const stale = revalidatable(stored);
      await this.#misses.lead(key, (share) => this.#fetch(miss, response, stale, share));
      return;
    }
    this.deps.metrics.edgeCoalescedMiss();
    const result = await pending;
    if (result.kind === "object" && this.#answers(result, request, resolved)) {
      exchange.sent = this.#sendObject(miss, response, result.object, result.cacheStatus);
    } else if (result.kind === "error") {
      exchange.sent = sendError(response, result.status, MISSED);
    } else {
      await this.#fetch(miss, response, undefined, () => undefined);
    }
  }

  /**
   * Whether what a coalesced fetch shared answers a viewer that waited on it: a fresh answer stored for
   * the viewer's variant, or a stale copy still within the `stale-if-error` the origin allowed.
   */
  #answers(result: SharedResult & { kind: "object" }, request: IncomingMessage, resolved: Resolved): boolean {
    return result.cacheStatus === "HIT"
      ? this.#policy.usableOnError(result.object)
      : this.#policy.satisfies(result.object, request, resolved);
  }

  /**
   * Revalidates a copy served stale, with no viewer waiting: one origin request per variant key at a
   * time (the coalesced miss of viewers of that variant arriving past the window, who wait on it),
   * stored under the same purge guard as a miss, given up at shutdown. Its failures are logged, never
   * thrown. Analytics count its origin bytes and time, not a request; metrics its origin time.
   */
  #revalidateInBackground(key: string, { request, resolved }: Miss, stored: CachedObject): void {
    if (this.#misses.waitFor(key) || this.#stopping.signal.aborted) return;
    const exchange: Exchange = { sent: 0, upstream: 0, originMs: undefined };
    const miss: Miss = { request, resolved, exchange, signal: this.#stopping.signal };
    const revalidation = this.#misses
      .lead(key, async (share) => {
        const fetched = await this.#origins.fetch(miss, revalidatable(stored));
        share(sharedResult(fetched));
        if (fetched.kind === "pass") discardBody(fetched.answer.body);
      })
      .catch((error: unknown) => {
        this.deps.logger.warn(
          { err: error, distribution: resolved.distribution.id, path: resolved.pathAndQuery },
          "background revalidation failed",
        );
      })
      // No viewer's answer, so no request: only what the origin cost (a 304 has no body).
      .then(() => {
        this.deps.traffic.recordOriginOnly({
          distributionId: resolved.distribution.id,
          organizationId: resolved.distribution.organization_id,
          upstreamBytes: exchange.upstream,
          originTimeMs: exchange.originMs,
        });
        if (exchange.originMs !== undefined) this.deps.metrics.edgeBackgroundOriginRequest(exchange.originMs);
      });
    this.#revalidations.add(revalidation);
    void revalidation.then(() => this.#revalidations.delete(revalidation));
  }

  /** Fetches a miss from the origin, shares the result with waiting viewers, and answers this viewer. */
  async #fetch(
    miss: Miss,
    response: ServerResponse,
    stale: CachedObject | undefined,
    share: (result: SharedResult) => void,
  ): Promise<void> {
    await this.#deliver(miss, response, await this.#origins.fetch(miss, stale), share);
  }

  /** Answers this viewer with what the origin gave, after sharing it with viewers waiting on the same miss. */
  async #deliver(
    miss: Miss,
    response: ServerResponse,
    fetched: Fetched,
    share: (result: SharedResult) => void,
  ): Promise<void> {
    share(sharedResult(fetched));
    switch (fetched.kind) {
      case "object":
        miss.exchange.sent = this.#sendObject(miss, response, fetched.object, fetched.cacheStatus);
        return;
      case "error":
        miss.exchange.sent = sendError(response, fetched.status, MISSED);
        return;
      case "pass":
        miss.exchange.cacheStatus = "MISS";
        await relay(miss.request, response, fetched.answer, miss.exchange, this.deps.logger, miss.resolved);
        return;
    }
  }

  #sendObject(
    { request, resolved, exchange }: Miss,
    response: ServerResponse,
    object: CachedObject,
    cacheStatus: "HIT" | "MISS",
  ): number {
    exchange.cacheStatus = cacheStatus;
    const age = this.#policy.age(object);
    return sendCachedObject(request, response, object, cacheStatus, age, resolved);
  }
}
