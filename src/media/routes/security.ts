import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { ok } from "../../http/envelope.ts";
import { ApiError } from "../../http/errors.ts";
import { Envelope, IdParams, mediaErrorResponses } from "../../http/schemas.ts";
import { toSecurity } from "../presenters.ts";
import { SecuritySettings, UpdateSecurityBody } from "../schemas.ts";
import { type MediaRouteOptions, mediaSecurity, requireLibrary } from "./common.ts";

const LibraryParams = IdParams("libraryId");
const tags = ["media: libraries"];

/** `/libraries/{libraryId}/security`: who may play a library's videos (enforced by `video/access.ts`). */
export const securityRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (
  app,
  { media, config },
) => {
  app.get(
    "/libraries/:libraryId/security",
    {
      config: { storedDataOnly: true },
      schema: {
        operationId: "getLibrarySecurity",
        tags,
        summary: "Get a library's security settings",
        security: mediaSecurity,
        params: LibraryParams,
        response: { ...mediaErrorResponses, 200: Envelope(SecuritySettings) },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      return ok("Security settings retrieved successfully", toSecurity(library));
    },
  );

  app.put(
    "/libraries/:libraryId/security",
    {
      schema: {
        operationId: "updateLibrarySecurity",
        tags,
        summary: "Update a library's security settings",
        description: "Each given field replaces the stored one; omitted fields are kept.",
        security: mediaSecurity,
        params: LibraryParams,
        body: UpdateSecurityBody(config.limits.securityValues),
        response: { ...mediaErrorResponses, 200: Envelope(SecuritySettings) },
      },
    },
    async (request) => {
      const { organizationId, userUuid } = request.auth;
      const result = await media.libraries.updateSecurity(
        organizationId,
        userUuid,
        request.params.libraryId,
        request.body,
      );
      switch (result.outcome) {
        case "updated":
          return ok("Security settings updated successfully", result.security);
        case "not_found":
          throw ApiError.notFound();
      }
    },
  );
};
