import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { cloudErrorResponses } from "../../http/schemas.ts";
import * as S from "../schemas.ts";
import { type CloudRouteOptions, callerOf, cloudError, routeKit, SUCCESS } from "./common.ts";

/** `/network/ip_addresses`: floating (public) IPs of a location. */
export const floatingIpRoutes: FastifyPluginAsyncTypebox<CloudRouteOptions> = async (app, { cloud, at }) => {
  const { doc, noParams, params } = routeKit(at);
  const AddressParams = params({ public_ipv4_address: Type.String({ format: "ipv4" }) });

  app.post(
    "/network/ip_addresses",
    {
      schema: {
        ...doc("allocateFloatingIp", "floating IPs", "Allocate the lowest free public address"),
        ...noParams,
        bodyOptional: true,
        body: S.CreateFloatingIpBody,
        response: { ...cloudErrorResponses, 200: S.FloatingIpView },
      },
    },
    async (request) => {
      const result = await cloud.floatingIps.allocate(callerOf(cloud, request), {
        billingAccountId: request.body.billing_account_id,
        name: request.body.name,
      });
      switch (result.outcome) {
        case "allocated":
          return result.ip;
        case "invalid":
        case "conflict":
          throw cloudError(result);
      }
    },
  );

  app.get(
    "/network/ip_addresses",
    {
      config: { storedDataOnly: true },
      schema: {
        ...doc("listFloatingIps", "floating IPs", "List floating IPs (optionally those of one VM)"),
        ...noParams,
        querystring: S.FloatingIpQuery,
        response: { ...cloudErrorResponses, 200: Type.Array(S.FloatingIpView) },
      },
    },
    async (request) => {
      const listed = await cloud.floatingIps.list(callerOf(cloud, request), {
        vmUuid: request.query.vm_uuid,
        billingAccountId: request.query.billing_account_id,
      });
      if (!Array.isArray(listed)) throw cloudError(listed);
      return listed;
    },
  );

  app.get(
    "/network/ip_addresses/:public_ipv4_address",
    {
      config: { storedDataOnly: true },
      schema: {
        ...doc("getFloatingIp", "floating IPs", "Get a floating IP"),
        params: AddressParams,
        response: { ...cloudErrorResponses, 200: S.FloatingIpView },
      },
    },
    async (request) => {
      const result = await cloud.floatingIps.get(
        callerOf(cloud, request),
        request.params.public_ipv4_address,
      );
      switch (result.outcome) {
        case "found":
          return result.ip;
        case "not_found":
          throw cloudError(result);
      }
    },
  );

  app.patch(
    "/network/ip_addresses/:public_ipv4_address",
    {
      schema: {
        ...doc("updateFloatingIp", "floating IPs", "Rename or re-bill a floating IP"),
        params: AddressParams,
        body: S.UpdateFloatingIpBody,
        response: { ...cloudErrorResponses, 200: S.FloatingIpView },
      },
    },
    async (request) => {
      const result = await cloud.floatingIps.update(
        callerOf(cloud, request),
        request.params.public_ipv4_address,
        {
          name: request.body.name,
          billingAccountId: request.body.billing_account_id,
        },
      );
      switch (result.outcome) {
        case "updated":
          return result.ip;
        case "not_found":
        case "invalid":
          throw cloudError(result);
      }
    },
  );

  app.delete(
    "/network/ip_addresses/:public_ipv4_address",
    {
      schema: {
        ...doc("deleteFloatingIp", "floating IPs", "Release a floating IP (refused while assigned)"),
        params: AddressParams,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) => {
      const result = await cloud.floatingIps.delete(
        callerOf(cloud, request),
        request.params.public_ipv4_address,
      );
      switch (result.outcome) {
        case "deleted":
          return SUCCESS;
        case "not_found":
        case "conflict":
          throw cloudError(result);
      }
    },
  );

  app.post(
    "/network/ip_addresses/:public_ipv4_address/assign",
    {
      schema: {
        ...doc("assignFloatingIp", "floating IPs", "Assign a floating IP to a VM or load balancer"),
        params: AddressParams,
        body: S.AssignBody,
        response: { ...cloudErrorResponses, 200: S.FloatingIpView },
      },
    },
    async (request) => {
      const result = await cloud.floatingIps.assign(
        callerOf(cloud, request),
        request.params.public_ipv4_address,
        {
          uuid: request.body.assigned_to,
          type: request.body.assigned_to_resource_type,
        },
      );
      switch (result.outcome) {
        case "assigned":
          return result.ip;
        case "not_found":
        case "conflict":
        case "rejected":
          throw cloudError(result);
      }
    },
  );

  app.post(
    "/network/ip_addresses/:public_ipv4_address/unassign",
    {
      schema: {
        ...doc("unassignFloatingIp", "floating IPs", "Unassign a floating IP"),
        params: AddressParams,
        response: { ...cloudErrorResponses, 200: S.FloatingIpView },
      },
    },
    async (request) => {
      const result = await cloud.floatingIps.unassign(
        callerOf(cloud, request),
        request.params.public_ipv4_address,
      );
      switch (result.outcome) {
        case "unassigned":
          return result.ip;
        case "not_found":
        case "rejected":
          throw cloudError(result);
      }
    },
  );
};
