import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { okMessage } from "../../http/envelope.ts";
import { ApiError } from "../../http/errors.ts";
import { IdParams, MessageOnly, mediaErrorResponses } from "../../http/schemas.ts";
import { EmptyObject, ValidateMigrationBody } from "../schemas.ts";
import { type MediaRouteOptions, mediaSecurity, requireLibrary } from "./common.ts";

export const migrationRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (app, { media }) => {
  app.post(
    "/libraries/:libraryId/migration-jobs/validate",
    {
      schema: {
        operationId: "validateMigrationCredentials",
        tags: ["media: migration"],
        summary: "Check an external video platform's access token",
        description:
          "Asks the provider. Rejected token: 400 `validation_credentials`; a token no header can carry (a line break): 400 `validation_format`, the provider not asked; provider unreachable, timing out, 429 or 5xx: 502 `{}`.",
        security: mediaSecurity,
        params: IdParams("libraryId"),
        body: ValidateMigrationBody,
        response: { ...mediaErrorResponses, 200: MessageOnly, 502: EmptyObject },
      },
    },
    async (request) => {
      await requireLibrary(media, request, request.params.libraryId);
      const { provider, credentials } = request.body;
      const check = await media.migrations.validate(provider, credentials.access_token);
      switch (check.outcome) {
        case "valid":
          return okMessage("Credentials are valid");
        case "rejected":
          throw ApiError.field(
            "credentials.access_token",
            "validation_credentials",
            `The ${provider} access token was rejected by the provider.`,
          );
        case "malformed":
          throw ApiError.field(
            "credentials.access_token",
            "validation_format",
            "The access token holds characters no provider's token has (line breaks, control or non-Latin-1 characters).",
          );
        case "unavailable":
          throw new ApiError(502, "Bad Gateway", { body: {} });
      }
    },
  );
};
