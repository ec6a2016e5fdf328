// The counting stores @fastify/rate-limit ships (CommonJS, without types of their own), used by
// src/http/rate-limit.ts to fall back from Redis to this process while Redis is away.
declare module "@fastify/rate-limit/store/*.js" {
  import type { FastifyRateLimitStore } from "@fastify/rate-limit";

  const Store: new (
    continueExceeding: boolean,
    exponentialBackoff: boolean,
    ...more: unknown[]
  ) => FastifyRateLimitStore;
  // biome-ignore lint/style/noDefaultExport: a CommonJS module's only export.
  export default Store;
}
