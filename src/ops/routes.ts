import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { Store, StoreReadiness } from "../store/database.ts";

const Status = Type.Object({ status: Type.String() });
const ReadinessStatus = Type.Object({ status: Type.String(), reason: Type.Optional(Type.String()) });

/** `/healthz`'s answer: the process runs. */
export const HEALTHY = { status: "ok" };

type Readiness = { code: 200 | 503; body: { status: string; reason?: string } };

const ANSWERS: Record<StoreReadiness, Readiness> = {
  ready: { code: 200, body: { status: "ready" } },
  unavailable: { code: 503, body: { status: "unavailable" } },
  // Every write would be answered 503: a balancer takes the node out until the store takes writes.
  read_only: {
    code: 503,
    body: {
      status: "read_only",
      reason:
        "the store answers but takes no writes (a PostgreSQL standby, or default_transaction_read_only on)",
    },
  },
  store_replaced: {
    code: 503,
    body: {
      status: "store_replaced",
      reason:
        "the SQLite file this process opened was removed or replaced (a restore into the data dir of a running server?): it takes no writes; restart the node to open the file now there",
    },
  },
  disk_full: {
    code: 503,
    body: {
      status: "disk_full",
      reason: "the disk under the data dir is full or read-only: the SQLite store takes no writes",
    },
  },
};

/** `/readyz`'s answer: 200 while the store answers and takes writes, else 503 with why. */
export async function readiness(store: Pick<Store, "readiness">): Promise<Readiness> {
  return ANSWERS[await store.readiness()];
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
        summary: "Store is reachable and takes writes",
        response: { 200: ReadinessStatus, 503: ReadinessStatus },
      },
    },
    async (_request, reply) => {
      const { code, body } = await readiness(store);
      return reply.code(code).send(body);
    },
  );
};
