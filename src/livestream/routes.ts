import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { requireApiKey } from "../http/auth.ts";
import { ApiError } from "../http/errors.ts";
import { mediaErrorResponses } from "../http/schemas.ts";
import type { IdentityService } from "../identity/service.ts";
import type { Store } from "../store/database.ts";

const Health = Type.Object({ status: Type.Union([Type.Literal("healthy"), Type.Literal("unhealthy")]) });

export const livestreamRoutes: FastifyPluginAsyncTypebox<{
  store: Store;
  identity: IdentityService;
}> = async (app, { store, identity }) => {
  requireApiKey(app, "livestream", identity);
  // With the store down the key cannot even be checked: that is the unhealthy answer, not a 500.
  // Expected errors (401, 403, 429...) go on to the application's handler.
  app.setErrorHandler(async (error, _request, reply) => {
    const status = (error as { statusCode?: number }).statusCode;
    if (error instanceof ApiError || (status !== undefined && status < 500)) throw error;
    return reply.code(503).send({ status: "unhealthy" });
  });

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
