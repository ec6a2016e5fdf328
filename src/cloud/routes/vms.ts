import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { ApiError } from "../../http/errors.ts";
import { cloudErrorResponses } from "../../http/schemas.ts";
import * as S from "../schemas.ts";
import type { UpdateVmOutcome } from "../vm-service.ts";
import { type CloudRouteOptions, callerOf, cloudError, routeKit, SUCCESS } from "./common.ts";

function updatedVm(result: UpdateVmOutcome): S.VmView {
  switch (result.outcome) {
    case "updated":
      return result.vm;
    case "not_found":
    case "rejected":
    case "invalid":
      throw cloudError(result);
  }
}

/** `/user-resource/vm`: virtual machines of a location. */
export const vmRoutes: FastifyPluginAsyncTypebox<CloudRouteOptions> = async (app, { cloud, at }) => {
  const { doc, noParams } = routeKit(at);

  app.post(
    "/user-resource/vm",
    {
      schema: {
        ...doc("createVm", "virtual machines", "Create a virtual machine"),
        ...noParams,
        body: S.CreateVmBody,
        response: { ...cloudErrorResponses, 200: S.VmView },
      },
    },
    async (request) => {
      const body = request.body;
      const result = await cloud.vms.create(callerOf(cloud, request), {
        name: body.name,
        osName: body.os_name,
        osVersion: body.os_version,
        vcpu: body.vcpu,
        ram: body.ram,
        disks: body.disks,
        username: body.username,
        password: body.password,
        publicKeys: [...(body.public_key ? [body.public_key] : []), ...(body.public_keys ?? [])],
        billingAccountId: body.billing_account_id,
        description: body.description,
        reservePublicIp: body.reserve_public_ip,
      });
      switch (result.outcome) {
        case "created":
          return result.vm;
        case "invalid":
        case "conflict":
        case "rejected":
          throw cloudError(result);
      }
    },
  );

  app.get(
    "/user-resource/vm",
    {
      config: { storedDataOnly: true },
      schema: {
        ...doc("getVm", "virtual machines", "Get a virtual machine"),
        ...noParams,
        querystring: S.VmUuidQuery,
        response: { ...cloudErrorResponses, 200: S.VmView },
      },
    },
    async (request) => {
      const result = await cloud.vms.get(callerOf(cloud, request), request.query.uuid);
      switch (result.outcome) {
        case "found":
          return result.vm;
        case "not_found":
          throw cloudError(result);
      }
    },
  );

  app.get(
    "/user-resource/vm/list",
    {
      config: { storedDataOnly: true },
      schema: {
        ...doc("listVms", "virtual machines", "List virtual machines of the location"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.VmView) },
      },
    },
    async (request) => cloud.vms.list(callerOf(cloud, request)),
  );

  app.patch(
    "/user-resource/vm",
    {
      schema: {
        ...doc(
          "updateVm",
          "virtual machines",
          "Rename, describe or resize a virtual machine, or charge it to another billing account",
        ),
        ...noParams,
        body: S.UpdateVmBody,
        response: { ...cloudErrorResponses, 200: S.VmView },
      },
    },
    async (request) => {
      const { uuid, name, vcpu, ram, description, billing_account_id: billingAccountId } = request.body;
      return updatedVm(
        await cloud.vms.update(callerOf(cloud, request), uuid, {
          name,
          vcpu,
          ram,
          description,
          billingAccountId,
        }),
      );
    },
  );

  for (const [action, state] of [
    ["start", "running"],
    ["stop", "stopped"],
  ] as const) {
    app.post(
      `/user-resource/vm/${action}`,
      {
        schema: {
          ...doc(
            `${action}Vm`,
            "virtual machines",
            `${action === "start" ? "Start" : "Stop"} a virtual machine`,
          ),
          ...noParams,
          body: S.VmUuidBody,
          response: { ...cloudErrorResponses, 200: S.VmView },
        },
      },
      async (request) =>
        updatedVm(await cloud.vms.setPower(callerOf(cloud, request), request.body.uuid, state)),
    );
  }

  app.delete(
    "/user-resource/vm",
    {
      schema: {
        ...doc("deleteVm", "virtual machines", "Delete a virtual machine (data disks are detached and kept)"),
        ...noParams,
        bodyOptional: true,
        body: S.DeleteVmBody,
        querystring: S.DeleteVmQuery,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) => {
      const uuid = request.body.uuid ?? request.query.uuid;
      if (uuid === undefined)
        throw ApiError.field("uuid", "validation_required", "The uuid field is required.");
      const result = await cloud.vms.delete(callerOf(cloud, request), uuid);
      switch (result.outcome) {
        case "deleted":
          return SUCCESS;
        case "not_found":
        case "rejected":
          throw cloudError(result);
      }
    },
  );
};
