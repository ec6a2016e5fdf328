import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { requireApiKey } from "../http/auth.ts";
import { mediaErrorResponses } from "../http/schemas.ts";
import type { IdentityService } from "../identity/service.ts";
import type { Store } from "../store/database.ts";

const Health = Type.Object({ status: Type.Union([Type.Literal("healthy"), Type.Literal("unhealthy")]) });

export const livestreamRoutes: FastifyPluginAsyncTypebox<{
  store: Store;
  identity: IdentityService;
}> = async (app, { store, identity }) => {
  requireApiKey(app, "livestream", identity);

  app.get(
    "/health",
    {
      schema: {
        operationId: "getLivestreamHealth",
        tags: ["livestream"],
        summary: "Livestream service health",
        security: [{ bearer: [] }, { apiKeyHeader: [] }],
        response: { ...mediaErrorResponses, 200: Health, 503: Health },
      },
    },
    async (_request, reply) => {
      const healthy = await store.ping();
      return reply.code(healthy ? 200 : 503).send({ status: healthy ? "healthy" : "unhealthy" });
    },
  );
};
