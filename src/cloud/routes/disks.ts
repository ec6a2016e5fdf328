import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { cloudErrorResponses, Uuid } from "../../http/schemas.ts";
import * as S from "../schemas.ts";
import { type CloudRouteOptions, callerOf, cloudError, routeKit, SUCCESS } from "./common.ts";

/** `/storage/disks` and attaching disks to VMs (`/user-resource/vm/storage/*`). */
export const diskRoutes: FastifyPluginAsyncTypebox<CloudRouteOptions> = async (app, { cloud, at }) => {
  const { doc, noParams, params } = routeKit(at);
  const DiskParams = params({ disk_uuid: Uuid });

  app.post(
    "/user-resource/vm/storage/attach",
    {
      schema: {
        ...doc("attachDisk", "disks", "Attach a disk to a virtual machine"),
        ...noParams,
        body: S.AttachBody,
        response: { ...cloudErrorResponses, 200: S.AttachView },
      },
    },
    async (request) => {
      const result = await cloud.disks.attach(
        callerOf(cloud, request),
        request.body.uuid,
        request.body.storage_uuid,
      );
      switch (result.outcome) {
        case "attached":
          return result.attachment;
        case "not_found":
        case "conflict":
        case "rejected":
          throw cloudError(result);
      }
    },
  );

  app.post(
    "/user-resource/vm/storage/detach",
    {
      schema: {
        ...doc("detachDisk", "disks", "Detach a disk from a virtual machine"),
        ...noParams,
        body: S.AttachBody,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) => {
      const result = await cloud.disks.detach(
        callerOf(cloud, request),
        request.body.uuid,
        request.body.storage_uuid,
      );
      switch (result.outcome) {
        case "detached":
          return SUCCESS;
        case "not_found":
        case "conflict":
        case "rejected":
          throw cloudError(result);
      }
    },
  );

  app.post(
    "/storage/disks",
    {
      schema: {
        ...doc("createDisk", "disks", "Create an empty disk"),
        ...noParams,
        body: S.CreateDiskBody,
        response: { ...cloudErrorResponses, 200: S.DiskView },
      },
    },
    async (request) => {
      const result = await cloud.disks.create(callerOf(cloud, request), {
        sizeGb: request.body.size_gb,
        billingAccountId: request.body.billing_account_id,
        displayName: request.body.display_name,
      });
      switch (result.outcome) {
        case "created":
          return result.disk;
        case "invalid":
        case "rejected":
          throw cloudError(result);
      }
    },
  );

  app.get(
    "/storage/disks",
    {
      config: { storedDataOnly: true },
      schema: {
        ...doc("listDisks", "disks", "List disks of the location"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.DiskView) },
      },
    },
    async (request) => cloud.disks.list(callerOf(cloud, request)),
  );

  app.get(
    "/storage/disks/:disk_uuid",
    {
      config: { storedDataOnly: true },
      schema: {
        ...doc("getDisk", "disks", "Get a disk"),
        params: DiskParams,
        response: { ...cloudErrorResponses, 200: S.DiskView },
      },
    },
    async (request) => {
      const result = await cloud.disks.get(callerOf(cloud, request), request.params.disk_uuid);
      switch (result.outcome) {
        case "found":
          return result.disk;
        case "not_found":
          throw cloudError(result);
      }
    },
  );

  app.patch(
    "/storage/disks/:disk_uuid",
    {
      schema: {
        ...doc("updateDisk", "disks", "Rename, re-bill or grow a disk"),
        params: DiskParams,
        body: S.UpdateDiskBody,
        response: { ...cloudErrorResponses, 200: S.DiskView },
      },
    },
    async (request) => {
      const result = await cloud.disks.update(callerOf(cloud, request), request.params.disk_uuid, {
        displayName: request.body.display_name,
        billingAccountId: request.body.billing_account_id,
        sizeGb: request.body.size_gb,
      });
      switch (result.outcome) {
        case "updated":
          return result.disk;
        case "not_found":
        case "invalid":
        case "rejected":
          throw cloudError(result);
      }
    },
  );

  app.delete(
    "/storage/disks/:disk_uuid",
    {
      schema: {
        ...doc("deleteDisk", "disks", "Delete a disk (refused while attached)"),
        params: DiskParams,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) => {
      const result = await cloud.disks.delete(callerOf(cloud, request), request.params.disk_uuid);
      switch (result.outcome) {
        case "deleted":
          return SUCCESS;
        case "not_found":
        case "conflict":
        case "rejected":
          throw cloudError(result);
      }
    },
  );
};
