import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { Store } from "../store/database.ts";

const Status = Type.Object({ status: Type.String() });

/** Unauthenticated probes for load balancers and orchestrators. */
export const opsRoutes: FastifyPluginAsyncTypebox<{ store: Store }> = async (app, { store }) => {
  app.get(
    "/healthz",
    {
      config: { rateLimit: false },
      schema: {
        operationId: "getHealthz",
        tags: ["operations"],
        summary: "Process is up",
        response: { 200: Status },
      },
    },
    async () => ({ status: "ok" }),
  );

  app.get(
    "/readyz",
    {
      config: { rateLimit: false },
      schema: {
        operationId: "getReadyz",
        tags: ["operations"],
        summary: "Store is reachable",
        response: { 200: Status, 503: Status },
      },
    },
    async (_request, reply) => {
      const ready = await store.ping();
      return reply.code(ready ? 200 : 503).send({ status: ready ? "ready" : "unavailable" });
    },
  );
};
