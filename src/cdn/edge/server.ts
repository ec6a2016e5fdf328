import type { IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { FastifyBaseLogger } from "fastify";
import CachePolicy from "http-cache-semantics";
import { type Agent, type Dispatcher, request as undiciRequest } from "undici";
import type { Bus } from "../../bus.ts";
import type { Config } from "../../config.ts";
import { createBoundedServer } from "../../http/listener.ts";
import { requestId } from "../../http/request-id.ts";
import { assertTargetAllowed, BlockedAddressError, createGuardedAgent } from "../../net/address-guard.ts";
import type { TrafficRecorder } from "../analytics.ts";
import { type CdnService, DISTRIBUTION_CHANNEL, type DistributionChange } from "../service.ts";
import type { DistributionTable } from "../tables.ts";
import { type CachedObject, currentAge, EdgeCache, freshness } from "./cache.ts";
import { DiskTier } from "./disk-tier.ts";
import {
  conditionalOutcome,
  endToEndHeaders,
  type HeaderMap,
  ifRangeMatches,
  notModified,
  notModifiedHeaders,
  parseRange,
  sendJsonError,
} from "./http.ts";
import type { MediaOrigin } from "./media-origin.ts";

/** How long an edge trusts what it read about a host name (changes also arrive on the bus). */
const DISTRIBUTION_TTL_MS = 500;
const MAX_REMEMBERED_HOSTS = 10_000;

/** Statuses that get the distribution's `default_ttl_s` when the origin gives no freshness. */
const DEFAULT_TTL_STATUSES = new Set([200, 203, 204, 300, 301, 308, 410]);

/** Request headers passed to the origin. */
const FORWARDED_REQUEST_HEADERS = ["accept", "accept-encoding", "accept-language", "user-agent", "referer"];

const STALE_IF_ERROR = /(?:^|,)\s*stale-if-error\s*=\s*"?(\d+)/i;

/** Whether the origin allowed this copy to be served, stale as it is, while the origin fails. */
function usableOnError(object: CachedObject, now = Date.now()): boolean {
  const seconds = STALE_IF_ERROR.exec(String(object.headers["cache-control"] ?? ""))?.[1];
  return seconds !== undefined && now < object.freshUntil + Number(seconds) * 1000;
}

const EXPLICIT_FRESHNESS = /(?:^|,)\s*(?:max-age|s-maxage)\s*=/i;
const NO_DEFAULT_TTL = /(?:^|,)\s*(?:no-store|no-cache|private)\b/i;

interface Resolved {
  distribution: DistributionTable;
  /** Path and query on the distribution (the path-style prefix removed): the cache key. */
  pathAndQuery: string;
}

/** What one viewer response did, for analytics. */
interface Exchange {
  sent: number;
  upstream: number;
  originMs: number | undefined;
}

type FetchResult =
  | { kind: "object"; object: CachedObject }
  | { kind: "error"; status: 502 | 504 }
  /** Not shareable (not cacheable or too large): each waiting viewer asks the origin itself. */
  | { kind: "pass" };

const ERROR_MESSAGES: Record<number, string> = {
  404: "Resource not found",
  405: "Method Not Allowed",
  416: "Range Not Satisfiable",
  500: "Internal server error",
  502: "Bad Gateway",
  504: "Gateway Timeout",
};

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

function hostOf(request: IncomingMessage): string | undefined {
  const host = request.headers.host?.trim().toLowerCase();
  if (!host) return undefined;
  if (host.startsWith("[")) return undefined; // an IPv6 literal names no distribution
  return host.replace(/:\d+$/, "").replace(/\.$/, "");
}

/** Adds `max-age=default_ttl_s` for the cache's freshness decision when the origin set none. */
function headersForPolicy(headers: HeaderMap, status: number, defaultTtlS: number): HeaderMap {
  const cacheControl = [headers["cache-control"] ?? []].flat().join(", ");
  if (
    defaultTtlS <= 0 ||
    !DEFAULT_TTL_STATUSES.has(status) ||
    EXPLICIT_FRESHNESS.test(cacheControl) ||
    headers.expires !== undefined ||
    NO_DEFAULT_TTL.test(cacheControl)
  ) {
    return headers;
  }
  return {
    ...headers,
    "cache-control": cacheControl ? `${cacheControl}, max-age=${defaultTtlS}` : `max-age=${defaultTtlS}`,
  };
}

/** Viewer request headers as the cache policy sees them: a CDN ignores viewers' Cache-Control. */
function policyRequest(request: IncomingMessage, resolved: Resolved): CachePolicy.Request {
  // Host-style and path-style requests name the same object.
  const headers = { ...request.headers, host: resolved.distribution.hostname };
  delete headers["cache-control"];
  delete headers.pragma;
  delete headers.authorization;
  return { url: resolved.pathAndQuery, method: "GET", headers };
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

export interface EdgeDeps {
  config: Config;
  logger: FastifyBaseLogger;
  bus: Bus;
  cdn: CdnService;
  traffic: TrafficRecorder;
  /** Serves `media://` (library) distributions; without it the edge answers 404 for them. */
  mediaOrigin?: MediaOrigin;
}

/**
 * The CDN edge: picks the distribution by Host (or path prefix), serves GET/HEAD from a byte-bounded
 * memory cache or the origin (RFC 9111 freshness), coalesces concurrent misses, counts every
 * response for analytics.
 */
export class EdgeServer {
  readonly cache: EdgeCache;
  readonly #server: Server;
  readonly #agent: Agent;
  readonly #hosts = new Map<string, { distribution: DistributionTable | undefined; expires: number }>();
  readonly #lookups = new Map<string, Promise<DistributionTable | undefined>>();
  readonly #inflight = new Map<string, Promise<FetchResult>>();
  #closed = false;
  #disk: DiskTier | undefined;

  constructor(private readonly deps: EdgeDeps) {
    this.cache = new EdgeCache(deps.config.edge.cacheBytes);
    if (deps.config.edge.diskCacheBytes > 0) {
      this.#disk = new DiskTier(
        join(deps.config.dataDir, "edge-cache"),
        deps.config.edge.diskCacheBytes,
        (id) => this.cache.epoch(id),
      );
      this.cache.useDiskTier(this.#disk);
    }
    this.#agent = createGuardedAgent({
      allowPrivate: deps.config.originAllowPrivate,
      connectTimeoutMs: deps.config.edge.originTimeoutMs,
    });
    this.#server = createBoundedServer(deps, (request, response) => {
      this.#handle(request, response).catch((error: unknown) => {
        deps.logger.error({ err: error }, "edge request failed");
        if (!response.headersSent) this.#sendError(response, 500);
        else response.destroy();
      });
    });
  }

  async start(host: string, port: number): Promise<string> {
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
      this.#hosts.delete(change.hostname);
      if (change.dropCache) this.cache.dropDistribution(change.id);
    });
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
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#server.closeIdleConnections();
    await closed;
    await this.#agent.close().catch(() => undefined);
    this.#disk?.close();
    await this.deps.traffic.stop();
  }

  async #distribution(hostname: string): Promise<DistributionTable | undefined> {
    const known = this.#hosts.get(hostname);
    if (known && known.expires > Date.now()) return known.distribution;
    let lookup = this.#lookups.get(hostname);
    if (!lookup) {
      lookup = this.deps.cdn.distributionForHost(hostname).finally(() => this.#lookups.delete(hostname));
      this.#lookups.set(hostname, lookup);
      lookup.then(
        (distribution) => {
          // Names that match nothing are remembered too; keep the memory bounded.
          if (this.#hosts.size >= MAX_REMEMBERED_HOSTS) this.#hosts.clear();
          this.#hosts.set(hostname, { distribution, expires: Date.now() + DISTRIBUTION_TTL_MS });
        },
        () => undefined,
      );
    }
    return lookup;
  }

  async #resolve(request: IncomingMessage): Promise<Resolved | undefined> {
    const url = request.url ?? "/";
    const queryAt = url.indexOf("?");
    let path = queryAt === -1 ? url : url.slice(0, queryAt);
    const query = queryAt === -1 ? "" : url.slice(queryAt);
    if (/^https?:\/\//i.test(path)) path = new URL(path).pathname; // absolute-form request target
    if (!path.startsWith("/")) path = `/${path}`;

    const host = hostOf(request);
    if (host) {
      const distribution = await this.#distribution(host);
      if (distribution) return { distribution, pathAndQuery: path + query };
    }
    // path-style: /{hostname}/{path}
    const slash = path.indexOf("/", 1);
    const segment = slash === -1 ? path.slice(1) : path.slice(1, slash);
    let hostname: string;
    try {
      hostname = decodeURIComponent(segment).toLowerCase();
    } catch {
      return undefined;
    }
    if (hostname === "" || hostname.length > 253) return undefined;
    const distribution = await this.#distribution(hostname);
    if (!distribution) return undefined;
    return { distribution, pathAndQuery: (slash === -1 ? "/" : path.slice(slash)) + query };
  }

  #sendError(response: ServerResponse, status: number, headers: OutgoingHttpHeaders = {}): number {
    return sendJsonError(
      response,
      status,
      { success: false, message: ERROR_MESSAGES[status] ?? "Error" },
      headers,
    );
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    response.setHeader("x-request-id", requestId(request));
    const resolved = await this.#resolve(request);
    if (!resolved) {
      this.#sendError(response, 404);
      return;
    }
    const { distribution, pathAndQuery } = resolved;
    const exchange: Exchange = { sent: 0, upstream: 0, originMs: undefined };
    response.once("close", () => {
      this.deps.traffic.record({
        distributionId: distribution.id,
        organizationId: distribution.organization_id,
        status: response.statusCode,
        sentBytes: exchange.sent,
        upstreamBytes: exchange.upstream,
        originTimeMs: exchange.originMs,
      });
    });

    // Library distributions (media://) are answered by the media origin, which applies the library's
    // access rules on every request; their responses are never stored in the edge cache.
    const mediaLibrary = /^media:\/\/(.+)$/i.exec(distribution.origin_url)?.[1];
    if (distribution.status === "active" && mediaLibrary && this.deps.mediaOrigin) {
      if (request.method !== "GET" && request.method !== "HEAD") {
        exchange.sent = this.#sendError(response, 405, { allow: "GET, HEAD" });
        return;
      }
      exchange.sent = await this.deps.mediaOrigin.serve(request, response, mediaLibrary, pathAndQuery);
      return;
    }
    if (distribution.status !== "active" || !/^https?:\/\//i.test(distribution.origin_url)) {
      exchange.sent = this.#sendError(response, 404);
      return;
    }
    if (request.method !== "GET" && request.method !== "HEAD") {
      exchange.sent = this.#sendError(response, 405, { allow: "GET, HEAD" });
      return;
    }

    const cached = await this.cache.get(distribution.id, pathAndQuery, request.headers);
    if (cached && this.#satisfies(cached, request, resolved)) {
      exchange.sent = this.#serveObject(request, response, cached, "HIT");
      return;
    }

    const key = EdgeCache.key(distribution.id, pathAndQuery);
    const pending = this.#inflight.get(key);
    if (pending) {
      const result = await pending;
      if (result.kind === "object" && this.#satisfies(result.object, request, resolved)) {
        exchange.sent = this.#serveObject(request, response, result.object, "MISS");
        return;
      }
      if (result.kind === "error") {
        exchange.sent = this.#sendError(response, result.status);
        return;
      }
      await this.#fetch(request, response, resolved, exchange, undefined, undefined);
      return;
    }

    let settle: (result: FetchResult) => void = () => undefined;
    const shared = new Promise<FetchResult>((resolve) => {
      settle = resolve;
    });
    this.#inflight.set(key, shared);
    let settled = false;
    const settleOnce = (result: FetchResult) => {
      if (settled) return;
      settled = true;
      this.#inflight.delete(key);
      settle(result);
    };
    try {
      // A stale copy of the same variant is revalidated instead of downloaded again.
      const stale = cached && !cached.varies && cached.status === 200 ? cached : undefined;
      await this.#fetch(request, response, resolved, exchange, settleOnce, stale);
    } finally {
      settleOnce({ kind: "pass" });
    }
  }

  /**
   * Whether a stored object answers this request without asking the origin: fresh, and, when the
   * origin named `Vary` headers, stored for the same values of them.
   */
  #satisfies(object: CachedObject, request: IncomingMessage, resolved: Resolved): boolean {
    if (Date.now() >= object.freshUntil) return false;
    return !object.varies || object.policy.satisfiesWithoutRevalidation(policyRequest(request, resolved));
  }

  /** The origin URL of a path; undefined when dot segments would climb out of the origin's base path. */
  #originUrl(distribution: DistributionTable, pathAndQuery: string): URL | undefined {
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

  /**
   * Asks the origin. A cacheable answer that fits the object limit is read whole, stored, shared with
   * the viewers waiting on `settle` and served; anything else is streamed through to this viewer.
   */
  async #fetch(
    request: IncomingMessage,
    response: ServerResponse,
    { distribution, pathAndQuery }: Resolved,
    exchange: Exchange,
    settle: ((result: FetchResult) => void) | undefined,
    stale: CachedObject | undefined,
  ): Promise<void> {
    const { originTimeoutMs, maxObjectBytes } = this.deps.config.edge;
    const epoch = this.cache.epoch(distribution.id);
    const started = performance.now();
    const headers: Record<string, string> = {};
    for (const name of FORWARDED_REQUEST_HEADERS) {
      const value = request.headers[name];
      if (typeof value === "string") headers[name] = value;
    }
    const forwardedFor = request.headers["x-forwarded-for"];
    const client = request.socket.remoteAddress ?? "";
    headers["x-forwarded-for"] = forwardedFor ? `${forwardedFor}, ${client}` : client;
    headers["x-forwarded-host"] = distribution.hostname;
    headers.via = "1.1 cumulo-edge";
    const etag = stale?.headers.etag;
    const lastModified = stale?.headers["last-modified"];
    if (typeof etag === "string") headers["if-none-match"] = etag;
    else if (typeof lastModified === "string") headers["if-modified-since"] = lastModified;

    // RFC 5861 `stale-if-error`: while the origin fails, a stale copy it allowed for that is served.
    const servedStale = (): boolean => {
      if (!stale || !usableOnError(stale) || response.headersSent) return false;
      settle?.({ kind: "object", object: stale });
      exchange.sent = this.#serveObject(request, response, stale, "HIT");
      return true;
    };
    const fail = (error: unknown) => {
      const status = isTimeout(error) ? 504 : 502;
      if (!(error instanceof BlockedAddressError) && status === 502) {
        this.deps.logger.debug({ err: error, distribution: distribution.id }, "origin unreachable");
      }
      if (servedStale()) return;
      settle?.({ kind: "error", status });
      if (!response.headersSent) exchange.sent = this.#sendError(response, status);
      else response.destroy();
    };

    const target = this.#originUrl(distribution, pathAndQuery);
    if (!target) {
      settle?.({ kind: "pass" });
      exchange.sent = this.#sendError(response, 404);
      return;
    }
    let upstream: Dispatcher.ResponseData;
    try {
      assertTargetAllowed(target, this.deps.config.originAllowPrivate);
      upstream = await undiciRequest(target, {
        method: "GET",
        headers,
        dispatcher: this.#agent,
        headersTimeout: originTimeoutMs,
        bodyTimeout: originTimeoutMs,
      });
    } catch (error) {
      exchange.originMs = performance.now() - started;
      fail(error);
      return;
    }
    exchange.originMs = performance.now() - started;

    const status = upstream.statusCode;
    const originHeaders = upstream.headers as HeaderMap;
    if (status >= 500 && stale && usableOnError(stale)) {
      await upstream.body.dump().catch(() => undefined);
      servedStale();
      return;
    }
    if (status === 304 && stale) {
      await upstream.body.dump().catch(() => undefined);
      const { policy, matches, modified } = stale.policy.revalidatedPolicy(
        policyRequest(request, { distribution, pathAndQuery }),
        { status: 304, headers: headersForPolicy(originHeaders, stale.status, distribution.default_ttl_s) },
      );
      if (!matches || modified) {
        // The origin's 304 does not fit the stored copy: fetch the object whole.
        await this.#fetch(request, response, { distribution, pathAndQuery }, exchange, settle, undefined);
        return;
      }
      exchange.originMs = performance.now() - started;
      const updated = notModifiedHeaders(endToEndHeaders(originHeaders));
      const refreshedHeaders = { ...stale.headers, ...updated };
      const refreshed: CachedObject = {
        ...stale,
        headers: refreshedHeaders,
        policy,
        ...freshness(policy, refreshedHeaders),
      };
      if (policy.storable() && refreshed.freshUntil > Date.now()) {
        this.cache.set(distribution.id, pathAndQuery, request.headers, refreshed, epoch);
      } else {
        this.cache.delete(distribution.id, pathAndQuery, request.headers);
      }
      settle?.({ kind: "object", object: refreshed });
      exchange.sent = this.#serveObject(request, response, refreshed, "MISS");
      return;
    }
    const policy = new CachePolicy(
      policyRequest(request, { distribution, pathAndQuery }),
      { status, headers: headersForPolicy(originHeaders, status, distribution.default_ttl_s) },
      { shared: true },
    );
    const declaredLength = Number(originHeaders["content-length"] ?? Number.NaN);
    const cacheable =
      policy.storable() &&
      policy.maxAge() - policy.age() > 0 &&
      (Number.isNaN(declaredLength) || declaredLength <= maxObjectBytes);

    if (!cacheable) {
      settle?.({ kind: "pass" });
      await this.#relay(
        request,
        response,
        status,
        endToEndHeaders(originHeaders),
        upstream.body,
        [],
        exchange,
        started,
      );
      return;
    }

    const chunks: Buffer[] = [];
    let size = 0;
    const body = upstream.body;
    try {
      for await (const chunk of body) {
        const buffer = chunk as Buffer;
        exchange.upstream += buffer.length;
        size += buffer.length;
        chunks.push(buffer);
        if (size > maxObjectBytes) {
          // Larger than announced (or chunked): stop buffering and stream the rest through.
          settle?.({ kind: "pass" });
          await this.#relay(
            request,
            response,
            status,
            endToEndHeaders(originHeaders),
            body,
            chunks,
            exchange,
            started,
          );
          return;
        }
      }
    } catch (error) {
      exchange.originMs = performance.now() - started;
      fail(error);
      return;
    }
    exchange.originMs = performance.now() - started;
    const storedHeaders = endToEndHeaders(originHeaders);
    const object: CachedObject = {
      status,
      headers: storedHeaders,
      body: Buffer.concat(chunks, size),
      policy,
      ...freshness(policy, storedHeaders),
    };
    this.cache.set(distribution.id, pathAndQuery, request.headers, object, epoch);
    settle?.({ kind: "object", object });
    exchange.sent = this.#serveObject(request, response, object, "MISS");
  }

  /** Sends a whole object (from cache or just fetched), honouring Range and conditional headers. */
  #serveObject(
    request: IncomingMessage,
    response: ServerResponse,
    object: CachedObject,
    cacheStatus: "HIT" | "MISS",
  ): number {
    const head = request.method === "HEAD";
    const conditions = request.headers;
    if (
      object.status === 200 &&
      conditions.range === undefined &&
      conditions["if-none-match"] === undefined &&
      conditions["if-modified-since"] === undefined
    ) {
      // The common case, kept cheap: the stored headers as a flat list plus the per-answer ones.
      response.writeHead(200, [
        ...flatHeaders(object),
        "age",
        String(currentAge(object)),
        "x-cache",
        cacheStatus,
        "accept-ranges",
        "bytes",
        "content-length",
        String(object.body.length),
      ]);
      response.end(head ? undefined : object.body);
      return head ? 0 : object.body.length;
    }
    const headers: OutgoingHttpHeaders = {
      ...object.headers,
      age: String(currentAge(object)),
      "x-cache": cacheStatus,
    };
    const size = object.body.length;
    if (object.status === 200) {
      headers["accept-ranges"] = "bytes";
      const range = conditionalOutcome(request.headers, headers, size);
      if (range.kind === "not-modified") {
        response.writeHead(304, notModifiedHeaders(headers));
        response.end();
        return 0;
      }
      if (range.kind === "unsatisfiable") {
        return this.#sendError(response, 416, { "content-range": `bytes */${size}`, "x-cache": cacheStatus });
      }
      if (range.kind === "range") {
        const slice = object.body.subarray(range.start, range.end + 1);
        response.writeHead(206, {
          ...headers,
          "content-range": `bytes ${range.start}-${range.end}/${size}`,
          "content-length": slice.length,
        });
        response.end(head ? undefined : slice);
        return head ? 0 : slice.length;
      }
    }
    response.writeHead(object.status, { ...headers, "content-length": size });
    const bodyless = head || object.status === 204 || object.status === 304;
    response.end(bodyless ? undefined : object.body);
    return bodyless ? 0 : size;
  }

  /**
   * Streams an origin response through without keeping it: `already` holds chunks read before the
   * decision. A viewer Range on a 200 of known length is cut out of the stream.
   */
  async #relay(
    request: IncomingMessage,
    response: ServerResponse,
    status: number,
    headers: OutgoingHttpHeaders,
    body: NodeJS.ReadableStream & { destroy(): void },
    already: Buffer[],
    exchange: Exchange,
    started: number,
  ): Promise<void> {
    const out: OutgoingHttpHeaders = { ...headers, age: "0", "x-cache": "MISS" };
    const declared = Number(headers["content-length"] ?? Number.NaN);
    const head = request.method === "HEAD";
    let skip = 0;
    let remaining = Number.POSITIVE_INFINITY;
    let outStatus = status;
    if (status === 200) {
      if (notModified(request.headers, out)) {
        body.destroy();
        response.writeHead(304, notModifiedHeaders(out));
        response.end();
        return;
      }
      if (!Number.isNaN(declared)) {
        out["accept-ranges"] = "bytes";
        const range = ifRangeMatches(request.headers, out)
          ? parseRange(request.headers.range, declared)
          : ({ kind: "none" } as const);
        if (range.kind === "unsatisfiable") {
          body.destroy();
          exchange.sent = this.#sendError(response, 416, {
            "content-range": `bytes */${declared}`,
            "x-cache": "MISS",
          });
          return;
        }
        if (range.kind === "range") {
          outStatus = 206;
          skip = range.start;
          remaining = range.end - range.start + 1;
          out["content-range"] = `bytes ${range.start}-${range.end}/${declared}`;
          out["content-length"] = String(remaining);
        }
      }
    }
    response.writeHead(outStatus, out);
    if (head || status === 204 || status === 304) {
      body.destroy();
      response.end();
      return;
    }
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
    let upstreamDone = false;
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        exchange.upstream += chunk.length;
        const piece = cut(chunk);
        if (piece) exchange.sent += piece.length;
        callback(null, piece);
      },
    });
    for (const chunk of already) {
      const piece = cut(chunk);
      if (piece) {
        exchange.sent += piece.length;
        response.write(piece);
      }
    }
    try {
      await pipeline(
        body,
        meter,
        async function* (source: AsyncIterable<Buffer>) {
          for await (const chunk of source) {
            yield chunk;
            if (remaining <= 0) {
              upstreamDone = true;
              return;
            }
          }
          upstreamDone = true;
        },
        response,
      );
    } catch (error) {
      if (!upstreamDone) this.deps.logger.debug({ err: error }, "edge stream ended early");
      response.destroy();
    } finally {
      exchange.originMs = performance.now() - started;
      body.destroy();
    }
  }
}
