import rateLimit, {
  type FastifyRateLimitStore,
  type FastifyRateLimitStoreCtor,
  type RateLimitPluginOptions,
} from "@fastify/rate-limit";
import LocalStore from "@fastify/rate-limit/store/LocalStore.js";
import RedisStore from "@fastify/rate-limit/store/RedisStore.js";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Redis } from "ioredis";
import type { RateLimitSetting } from "../config.ts";
import { isDeveloperModeCall } from "../devmode/prefix.ts";
import { credentialOf } from "../identity/service.ts";
import { clientNetwork } from "./client-address.ts";
import { ApiError } from "./errors.ts";
import { isSelfRequest } from "./self-requests.ts";

type Counted = Parameters<FastifyRateLimitStore["incr"]>[1];

/** How the plugin calls a store: with the window and the budget after the callback (its type omits them). */
type Increment = (key: string, callback: Counted, timeWindow?: number, max?: number) => void;

/**
 * Counts in Redis while its connection is ready. While it is away each node counts for itself, as
 * nodes without Redis do: a Redis outage must not refuse every request (it answered 500 before).
 */
class SharedOrLocalStore implements FastifyRateLimitStore {
  constructor(
    private readonly redis: Redis,
    private readonly shared: FastifyRateLimitStore,
    private readonly local: FastifyRateLimitStore,
  ) {}

  incr(key: string, callback: Counted, timeWindow?: number, max?: number): void {
    const count = (store: FastifyRateLimitStore, done: Counted) =>
      (store.incr as Increment)(key, done, timeWindow, max);
    if (this.redis.status !== "ready") count(this.local, callback);
    else
      count(this.shared, (error, result) => (error ? count(this.local, callback) : callback(null, result)));
  }

  child(routeOptions: Parameters<FastifyRateLimitStore["child"]>[0]): FastifyRateLimitStore {
    // A limiter made with `createRateLimit` (the wrong-key throttle) has no route, whose method and
    // URL the shared store writes into its keys: "undefinedundefined" in every key in Redis. (The
    // plugin's type names the route's options, where it passes them under `routeInfo`.)
    const { routeInfo } = routeOptions as unknown as { routeInfo: { method?: string } };
    const named =
      routeInfo.method === undefined
        ? ({ ...routeOptions, routeInfo: { ...routeInfo, method: "", url: "" } } as typeof routeOptions)
        : routeOptions;
    return new SharedOrLocalStore(this.redis, this.shared.child(named), this.local.child(named));
  }
}

/** The plugin makes its store from its options: one that shares counts through `redis` under `nameSpace`. */
const sharedOrLocal = (redis: Redis, nameSpace: string): FastifyRateLimitStoreCtor =>
  class extends SharedOrLocalStore {
    constructor({ continueExceeding = false, exponentialBackoff = false, cache }: RateLimitPluginOptions) {
      super(
        redis,
        new RedisStore(continueExceeding, exponentialBackoff, redis, nameSpace),
        new LocalStore(continueExceeding, exponentialBackoff, cache),
      );
    }
  };

/**
 * Per-key request budget. It runs after authentication so the budget belongs to the verified key;
 * with Redis the counters are shared by every node (each node's own while Redis is away).
 */
export async function registerRateLimit(
  app: FastifyInstance,
  setting: RateLimitSetting,
  redis: { client: Redis; prefix: string } | undefined,
  onRefused?: () => void,
) {
  await app.register(rateLimit, {
    global: true,
    // After every onRequest hook (authentication names the key) and before the body is read, so
    // a body that cannot be read still counts, and an over-budget one is not read at all.
    hook: "preParsing",
    max: setting.max,
    timeWindow: setting.windowMs,
    enableDraftSpec: true,
    // The API reference page and its script are operational, like /healthz and /openapi.json; the
    // requests a seed sends through the API are the operator's, not the seeded key's; and so are a
    // test harness's developer-mode calls (a snapshot load before each test), which reach this hook
    // only once their operator key is checked. Those routes exist only in developer mode.
    allowList: (request) => {
      const route = request.routeOptions.url ?? "";
      return route.startsWith("/docs") || isDeveloperModeCall(route) || isSelfRequest(request);
    },
    ...(redis ? { store: sharedOrLocal(redis.client, `${redis.prefix}rate-limit:`) } : {}),
    keyGenerator: (request) =>
      request.auth
        ? `${request.auth.organizationId}:${credentialOf(request.auth)}`
        : `ip:${clientNetwork(request.ip)}`,
    errorResponseBuilder: (_request, context) => {
      onRefused?.();
      return new ApiError(429, "Too many requests", {
        error: "rate_limited",
        headers: { "retry-after": String(Math.ceil(context.ttl / 1000)) },
      });
    },
  });
}

type RateLimiter = ReturnType<FastifyInstance["createRateLimit"]>;

/** The contract's 429, with the headers of a budget of `max` that is spent for `resetSeconds` more. */
export function tooManyRequests(max: number, resetSeconds: number): ApiError {
  const reset = String(resetSeconds);
  return new ApiError(429, "Too many requests", {
    error: "rate_limited",
    headers: {
      "retry-after": reset,
      "ratelimit-limit": String(max),
      "ratelimit-remaining": "0",
      "ratelimit-reset": reset,
    },
  });
}

/** Counts the request against `limiter`: the contract's 429, with the headers of that budget, once it is spent. */
export async function refuseOverBudget(limiter: RateLimiter, request: FastifyRequest): Promise<void> {
  const limit = await limiter(request);
  if (limit.isAllowed || !limit.isExceeded) return;
  throw tooManyRequests(limit.max, limit.ttlInSeconds);
}
