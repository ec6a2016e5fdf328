import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyRequest } from "fastify";
import { ApiError } from "../../http/errors.ts";
import { cloudErrorResponses } from "../../http/schemas.ts";
import * as S from "../schemas.ts";
import { RESTRICTED } from "../token-service.ts";
import { type CloudRouteOptions, cloudError, routeKit, SUCCESS } from "./common.ts";

/** `/user-resource/token`: cloud API tokens. */
export const tokenRoutes: FastifyPluginAsyncTypebox<CloudRouteOptions> = async (app, { cloud, at }) => {
  const { doc, noParams } = routeKit(at);
  // A restricted token may not manage tokens whatever it sends: refused before its body is checked.
  const refuseRestricted = async (request: FastifyRequest) => {
    if (request.auth.restricted) throw cloudError(RESTRICTED);
  };

  app.post(
    "/user-resource/token",
    {
      preValidation: refuseRestricted,
      schema: {
        ...doc("createToken", "tokens", "Create an API token (its secret is shown once)"),
        ...noParams,
        bodyOptional: true,
        body: S.CreateTokenBody,
        response: { ...cloudErrorResponses, 200: Type.Array(S.CreatedTokenView) },
      },
    },
    async (request) => {
      const result = await cloud.tokens.create(request.auth, {
        billingAccountId: request.body.billing_account_id,
        description: request.body.description ?? "",
        restricted: request.body.restricted ?? false,
      });
      switch (result.outcome) {
        case "created":
          return [result.token];
        case "forbidden":
        case "invalid":
          throw cloudError(result);
      }
    },
  );

  app.get(
    "/user-resource/token/list",
    {
      config: { storedDataOnly: true },
      schema: {
        ...doc("listTokens", "tokens", "List API tokens"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.TokenView) },
      },
    },
    async (request) => cloud.tokens.list(request.auth),
  );

  app.patch(
    "/user-resource/token",
    {
      preValidation: refuseRestricted,
      schema: {
        ...doc("updateToken", "tokens", "Change a token's description, restriction or billing account"),
        ...noParams,
        body: S.UpdateTokenBody,
        response: { ...cloudErrorResponses, 200: Type.Array(S.TokenView) },
      },
    },
    async (request) => {
      const { token_id, description, restricted, billing_account_id } = request.body;
      const result = await cloud.tokens.update(request.auth, token_id, {
        description,
        restricted,
        billingAccountId: billing_account_id,
      });
      switch (result.outcome) {
        case "updated":
          return [result.token];
        case "not_found":
          throw new ApiError(404, "Failed to update token: token not found");
        case "forbidden":
        case "invalid":
          throw cloudError(result);
      }
    },
  );

  app.delete(
    "/user-resource/token",
    {
      preValidation: refuseRestricted,
      schema: {
        ...doc("deleteToken", "tokens", "Delete an API token; it stops working at once"),
        ...noParams,
        bodyOptional: true,
        body: S.TokenIdBody,
        querystring: S.TokenIdBody,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) => {
      const result = await cloud.tokens.delete(request.auth, request.body.token_id ?? request.query.token_id);
      switch (result.outcome) {
        case "deleted":
          return SUCCESS;
        case "missing_id":
          throw ApiError.field("token_id", "validation_required", "The token_id field is required.");
        case "not_found":
          throw new ApiError(404, "Failed to delete token: token not found");
        case "forbidden":
          throw cloudError(result);
      }
    },
  );
};
