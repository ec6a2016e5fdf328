import type { IncomingMessage, OutgoingHttpHeaders } from "node:http";
import CachePolicy from "http-cache-semantics";
import type { Clock } from "../../clock.ts";
import type { DistributionRow } from "../tables.ts";
import type { CachedObject } from "./cache.ts";
import { endToEndHeaders, type HeaderMap, notModifiedHeaders } from "./http.ts";

/** A request resolved to its distribution. */
export interface Resolved {
  distribution: DistributionRow;
  /**
   * Path and query on the distribution (the path-style prefix removed), normalized (RFC 3986 6.2.2,
   * `normalizedPathAndQuery`): the cache key, and what the origin is asked for.
   */
  pathAndQuery: string;
  /** The path-style prefix (`/{hostname}`) the viewer's URL starts with; absent host-style. */
  pathPrefix?: string;
}

/**
 * The statuses `http-cache-semantics` stores. RFC 9111 (section 3) lets a shared cache store any
 * final status the origin made explicitly fresh, and an origin that marks its 503 `max-age=5` asks
 * its CDN to shield it while it recovers: the other 4xx and 5xx are judged as a 200 would be, which
 * stores them only with explicit freshness (`default_ttl_s` and the heuristics go by the real status).
 */
const STATUSES_THE_LIBRARY_STORES = new Set([
  200, 203, 204, 206, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 501,
]);
const judgedAs = (status: number): number =>
  status >= 400 && !STATUSES_THE_LIBRARY_STORES.has(status) ? 200 : status;

/** Statuses that get the distribution's `default_ttl_s` when the origin gives no freshness. */
const DEFAULT_TTL_STATUSES = new Set([200, 203, 204, 300, 301, 308, 410]);
const EXPLICIT_FRESHNESS = /(?:^|,)\s*(?:max-age|s-maxage)\s*=/i;
const NO_DEFAULT_TTL = /(?:^|,)\s*(?:no-store|no-cache|private)\b/i;
const STALE_IF_ERROR = /(?:^|,)\s*stale-if-error\s*=\s*"?(\d+)/i;
const STALE_WHILE_REVALIDATE = /(?:^|,)\s*stale-while-revalidate\s*=\s*"?(\d+)/i;
/** Directives that forbid serving a stale copy without revalidating it first (RFC 9111 5.2.2.2, 5.2.2.8). */
const NO_STALE = /(?:^|,)\s*(?:must-revalidate|proxy-revalidate)\b/i;

/**
 * The origin's headers as the cache's freshness decision reads them: `Cache-Control` in lower case
 * (its directives are case-insensitive, RFC 9111 5.2, and `http-cache-semantics` matches them as
 * written, so a `Private` answer would be shared), and `max-age=default_ttl_s` added when the origin
 * set no freshness.
 */
function headersForPolicy(headers: HeaderMap, status: number, defaultTtlS: number): HeaderMap {
  const cacheControl = [headers["cache-control"] ?? []].flat().join(", ").toLowerCase();
  const usesDefault =
    defaultTtlS > 0 &&
    DEFAULT_TTL_STATUSES.has(status) &&
    !EXPLICIT_FRESHNESS.test(cacheControl) &&
    headers.expires === undefined &&
    !NO_DEFAULT_TTL.test(cacheControl);
  if (!usesDefault) return cacheControl ? { ...headers, "cache-control": cacheControl } : headers;
  return {
    ...headers,
    "cache-control": cacheControl ? `${cacheControl}, max-age=${defaultTtlS}` : `max-age=${defaultTtlS}`,
  };
}

/**
 * Viewer request headers as the cache policy sees them: a CDN ignores viewers' Cache-Control, and
 * viewers' credentials never reach the origin, so they cannot make an answer personal.
 */
function policyRequest(request: IncomingMessage, resolved: Resolved): CachePolicy.Request {
  // Host-style and path-style requests name the same object.
  const headers = { ...request.headers, host: resolved.distribution.hostname };
  delete headers["cache-control"];
  delete headers.pragma;
  delete headers.authorization;
  return { url: resolved.pathAndQuery, method: "GET", headers };
}

/** What an origin's 304 does to the stale copy it answered for. */
export type Revalidation =
  /** The 304 does not fit the stored copy: fetch the object whole. */
  | { kind: "refetch" }
  /** The 304 sets a cookie: the refreshed copy is this viewer's alone, and the stored one is dropped. */
  | { kind: "personal"; object: CachedObject }
  | { kind: "refreshed"; object: CachedObject; storable: boolean };

/**
 * The edge's RFC 9111 decisions (shared-cache rules, through `http-cache-semantics`) on the injected
 * clock: what may be stored, for how long, and when a stored copy answers a request.
 */
export class EdgeCachePolicy {
  /** `CachePolicy` reading the injected clock wherever it reads the time. */
  readonly #Policy: typeof CachePolicy;

  constructor(private readonly clock: Clock) {
    const now = () => clock.now().getTime();
    this.#Policy = class extends CachePolicy {
      now(): number {
        return now();
      }
    };
  }

  #now(): number {
    return this.clock.now().getTime();
  }

  /**
   * The policy of an origin answer, with the distribution's default TTL where the origin set none.
   * No heuristic freshness from `Last-Modified`: `default_ttl_s` replaces it, so a 404 or a
   * `default_ttl_s: 0` answer without explicit freshness is not kept (the 304 refresh inherits this).
   */
  forResponse(request: IncomingMessage, resolved: Resolved, status: number, headers: HeaderMap): CachePolicy {
    const withTtl = headersForPolicy(headers, status, resolved.distribution.default_ttl_s);
    return new this.#Policy(
      policyRequest(request, resolved),
      { status: judgedAs(status), headers: withTtl },
      { shared: true, cacheHeuristic: 0 },
    );
  }

  /** A policy read back from the disk tier. */
  restore(serialized: CachePolicy.CachePolicyObject): CachePolicy {
    return this.#Policy.fromObject(serialized);
  }

  /**
   * Whether an origin answer may be stored and shared: storable, fresh on arrival, within the object
   * limit, and not personal (a `Set-Cookie` answer is one viewer's, as nginx does by default).
   */
  mayStore(policy: CachePolicy, headers: HeaderMap, maxObjectBytes: number): boolean {
    const declaredLength = Number(headers["content-length"] ?? Number.NaN);
    return (
      headers["set-cookie"] === undefined &&
      policy.storable() &&
      policy.maxAge() - policy.age() > 0 &&
      (Number.isNaN(declaredLength) || declaredLength <= maxObjectBytes)
    );
  }

  /** A just-received answer as the cache keeps it, its freshness computed once instead of on every hit. */
  cachedObject(
    status: number,
    headers: OutgoingHttpHeaders,
    body: Buffer,
    policy: CachePolicy,
  ): CachedObject {
    const now = this.#now();
    const ageAtReceipt = policy.age();
    return {
      status,
      headers,
      body,
      policy,
      freshUntil: now + (policy.maxAge() - ageAtReceipt) * 1000,
      ageAtReceipt,
      receivedAt: now,
      varies: headers.vary !== undefined,
    };
  }

  /**
   * Whether a stored object answers this request without asking the origin: fresh, and, when the
   * origin named `Vary` headers, stored for the same values of them.
   */
  satisfies(object: CachedObject, request: IncomingMessage, resolved: Resolved): boolean {
    if (this.#now() >= object.freshUntil) return false;
    return !object.varies || object.policy.satisfiesWithoutRevalidation(policyRequest(request, resolved));
  }

  /** RFC 5861 `stale-if-error`: whether the origin allowed this stale copy to be served while it fails. */
  usableOnError(object: CachedObject): boolean {
    const seconds = STALE_IF_ERROR.exec(String(object.headers["cache-control"] ?? ""))?.[1];
    return seconds !== undefined && this.#now() < object.freshUntil + Number(seconds) * 1000;
  }

  /**
   * RFC 5861 `stale-while-revalidate`: whether this stale copy may answer the request at once while it
   * is revalidated in the background (within that many seconds past its freshness, the variant the
   * request asks for, and no `must-revalidate` or `proxy-revalidate`).
   */
  servableWhileRevalidating(object: CachedObject, request: IncomingMessage, resolved: Resolved): boolean {
    const cacheControl = String(object.headers["cache-control"] ?? "");
    const seconds = Number(STALE_WHILE_REVALIDATE.exec(cacheControl)?.[1] ?? 0);
    if (seconds <= 0 || NO_STALE.test(cacheControl)) return false;
    if (this.#now() >= object.freshUntil + seconds * 1000) return false;
    // The policy's own reading of the window, which also compares the `Vary` headers.
    return (
      !object.varies || object.policy.evaluateRequest(policyRequest(request, resolved)).response !== undefined
    );
  }

  /** Whole seconds since the origin generated the object (the `Age` header). */
  age(object: CachedObject): number {
    return Math.max(0, Math.floor(object.ageAtReceipt + (this.#now() - object.receivedAt) / 1000));
  }

  /** The stale copy as the origin's 304 refreshes it (RFC 9111 section 4.3.4). */
  revalidated(
    stale: CachedObject,
    request: IncomingMessage,
    resolved: Resolved,
    headers: HeaderMap,
  ): Revalidation {
    const withTtl = headersForPolicy(headers, stale.status, resolved.distribution.default_ttl_s);
    const { policy, matches, modified } = stale.policy.revalidatedPolicy(policyRequest(request, resolved), {
      status: 304,
      headers: withTtl,
    });
    if (!matches || modified) return { kind: "refetch" };
    const updated = notModifiedHeaders(endToEndHeaders(headers));
    const object = this.cachedObject(stale.status, { ...stale.headers, ...updated }, stale.body, policy);
    if (updated["set-cookie"] !== undefined) return { kind: "personal", object };
    return { kind: "refreshed", object, storable: policy.storable() && object.freshUntil > this.#now() };
  }
}
