import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { Store } from "../store/database.ts";

const Status = Type.Object({ status: Type.String() });

/** `/healthz`'s answer: the process runs. */
export const HEALTHY = { status: "ok" };

/** `/readyz`'s answer: 200 while the store answers, else 503. */
export async function readiness(
  store: Pick<Store, "ping">,
): Promise<{ code: 200 | 503; body: { status: string } }> {
  const ready = await store.ping();
  return ready ? { code: 200, body: { status: "ready" } } : { code: 503, body: { status: "unavailable" } };
}

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
    async () => HEALTHY,
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
      const { code, body } = await readiness(store);
      return reply.code(code).send(body);
    },
  );
};
