import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { ApiError } from "../../http/errors.ts";
import { cloudErrorResponses } from "../../http/schemas.ts";
import * as S from "../schemas.ts";
import { type CloudRouteOptions, cloudError, routeKit, SUCCESS } from "./common.ts";

/** `/storage/user` and `/storage/api/s3`: the organization's object-storage user and keys. */
export const objectStorageRoutes: FastifyPluginAsyncTypebox<CloudRouteOptions> = async (
  app,
  { cloud, at },
) => {
  const { doc, noParams } = routeKit(at);

  app.get(
    "/storage/user",
    {
      config: { mayWrite: true },
      schema: {
        ...doc(
          "getS3User",
          "object storage",
          "The object-storage user with its keys (created on first call by a write-capable key; a console session needs its X-CSRF-Token)",
        ),
        ...noParams,
        response: { ...cloudErrorResponses, 200: S.S3UserView },
      },
    },
    async (request) => {
      const result = await cloud.objectStorage.user(request.auth);
      switch (result.outcome) {
        case "found":
          return result.user;
        case "forbidden":
          throw cloudError(result);
      }
    },
  );

  app.get(
    "/storage/user/keys",
    {
      config: { mayWrite: true },
      schema: {
        ...doc(
          "listS3Keys",
          "object storage",
          "List object-storage keys (the user is created on first call by a write-capable key; a console session needs its X-CSRF-Token)",
        ),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.S3KeyView) },
      },
    },
    async (request) => cloud.objectStorage.keys(request.auth),
  );

  app.post(
    "/storage/user/keys",
    {
      schema: {
        ...doc("createS3Key", "object storage", "Generate one more key pair; returns all keys"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.S3KeyView) },
      },
    },
    async (request) => cloud.objectStorage.createKey(request.auth),
  );

  app.delete(
    "/storage/user/keys",
    {
      schema: {
        ...doc("deleteS3Key", "object storage", "Delete a key pair (access_key in the form, JSON or query)"),
        ...noParams,
        bodyOptional: true,
        body: S.AccessKeyBody,
        querystring: S.AccessKeyBody,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) => {
      const accessKey = request.body.access_key ?? request.query.access_key;
      if (!accessKey)
        throw ApiError.field("access_key", "validation_required", "The access_key field is required.");
      const result = await cloud.objectStorage.deleteKey(request.auth, accessKey);
      switch (result.outcome) {
        case "deleted":
          return SUCCESS;
        case "not_found":
          throw cloudError(result);
      }
    },
  );

  app.get(
    "/storage/api/s3",
    {
      schema: {
        ...doc("getS3Endpoint", "object storage", "The S3 endpoint URL"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: S.S3Info },
      },
    },
    async (request) => ({ url: cloud.objectStorage.endpoint(request.socket.localPort) }),
  );
};
