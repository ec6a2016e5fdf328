import rateLimit from "@fastify/rate-limit";
import type { FastifyInstance } from "fastify";
import type { Redis } from "ioredis";
import type { RateLimitSetting } from "../config.ts";
import { credentialOf } from "../identity/service.ts";
import { clientNetwork } from "./client-address.ts";
import { ApiError } from "./errors.ts";

/**
 * Per-key request budget. It runs after authentication so the budget belongs to the verified key;
 * with Redis the counters are shared by every node.
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
    // The API reference page and its script are operational, like /healthz and /openapi.json.
    allowList: (request) => request.routeOptions.url?.startsWith("/docs") ?? false,
    ...(redis ? { redis: redis.client, nameSpace: `${redis.prefix}rate-limit:` } : {}),
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
