import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { requireApiKey } from "../../http/auth.ts";
import { ok } from "../../http/envelope.ts";
import { ApiError } from "../../http/errors.ts";
import { Envelope, mediaErrorResponses } from "../../http/schemas.ts";
import { ApiKeyParams, CreateApiKeyBody, CreatedOrganizationApiKey, OrganizationApiKey } from "../schemas.ts";
import type { IdentityService } from "../service.ts";

const tags = ["organization"];
/** Keys in the media group's headers, or the console's session cookie. */
const security: Record<string, string[]>[] = [{ bearer: [] }, { apiKeyHeader: [] }, { consoleSession: [] }];

/**
 * `/v1/organization/api-keys`: the organization's API keys (SPEC: "created in the provider's console
 * under organization API keys"). Answers in the media envelope; read-only keys and restricted cloud
 * tokens may only list.
 */
export const apiKeyRoutes: FastifyPluginAsyncTypebox<{ identity: IdentityService }> = async (
  app,
  { identity },
) => {
  requireApiKey(app, "media", identity);
  // A restricted cloud token may not manage keys (contract, section 3): here it could otherwise make
  // an unrestricted admin key, or revoke the organization's own. Refused before the body is checked.
  app.addHook("preValidation", async (request) => {
    if (request.method !== "GET" && request.auth.restricted) {
      throw ApiError.forbidden("A restricted token cannot manage API keys");
    }
  });

  app.get(
    "/api-keys",
    {
      schema: {
        operationId: "listOrganizationApiKeys",
        tags,
        summary: "List the organization's API keys (never their secrets)",
        security,
        response: { ...mediaErrorResponses, 200: Envelope(Type.Array(OrganizationApiKey)) },
      },
    },
    async (request) => {
      const keys = (await identity.listApiKeys(request.auth.organizationId)) ?? [];
      return ok(
        "API keys",
        keys.map(({ kind: _kind, ...key }) => key),
      );
    },
  );

  app.post(
    "/api-keys",
    {
      schema: {
        operationId: "createOrganizationApiKey",
        tags,
        summary: "Create an API key; its secret is in this answer only",
        security,
        body: CreateApiKeyBody,
        response: { ...mediaErrorResponses, 201: Envelope(CreatedOrganizationApiKey) },
      },
    },
    async (request, reply) => {
      const result = await identity.createApiKey(request.auth.organizationId, {
        name: request.body.name,
        readOnly: request.body.read_only ?? false,
      });
      switch (result.outcome) {
        case "created": {
          const { outcome: _outcome, ...key } = result;
          return reply.code(201).send(ok("API key created", key));
        }
        case "organization_not_found":
          // The caller's own organization was deleted between authentication and now.
          throw ApiError.notFound();
      }
    },
  );

  app.delete(
    "/api-keys/:keyId",
    {
      schema: {
        operationId: "revokeOrganizationApiKey",
        tags,
        summary: "Revoke an API key; every node refuses it from the next request",
        security,
        params: ApiKeyParams,
        response: { ...mediaErrorResponses, 204: Type.Null() },
      },
    },
    async (request, reply) => {
      const result = await identity.revokeOrganizationApiKey(
        request.auth.organizationId,
        request.params.keyId,
      );
      switch (result.outcome) {
        case "revoked":
          return reply.code(204).send(null);
        case "not_found":
          throw ApiError.notFound();
      }
    },
  );
};
