import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { cloudErrorResponses, Uuid } from "../../http/schemas.ts";
import type { RemoveOutcome, SetLoadBalancerBillingOutcome } from "../load-balancer-service.ts";
import * as S from "../schemas.ts";
import { type CloudRouteOptions, callerOf, cloudError, routeKit, SUCCESS } from "./common.ts";

function removed(result: RemoveOutcome) {
  switch (result.outcome) {
    case "deleted":
      return SUCCESS;
    case "not_found":
    case "rejected":
      throw cloudError(result);
  }
}

function updated(result: SetLoadBalancerBillingOutcome): S.LoadBalancerView {
  switch (result.outcome) {
    case "updated":
      return result.loadBalancer;
    case "not_found":
    case "invalid":
      throw cloudError(result);
  }
}

/** `/network/load_balancers`: load balancers with their forwarding rules and targets. */
export const loadBalancerRoutes: FastifyPluginAsyncTypebox<CloudRouteOptions> = async (
  app,
  { cloud, at },
) => {
  const { doc, noParams, params } = routeKit(at);
  const LbParams = params({ load_balancer_uuid: Uuid });

  app.post(
    "/network/load_balancers",
    {
      schema: {
        ...doc("createLoadBalancer", "load balancers", "Create a load balancer"),
        ...noParams,
        bodyOptional: true,
        body: S.CreateLoadBalancerBody,
        response: { ...cloudErrorResponses, 200: S.LoadBalancerView },
      },
    },
    async (request) => {
      const body = request.body;
      const result = await cloud.loadBalancers.create(callerOf(cloud, request), {
        displayName: body.display_name,
        billingAccountId: body.billing_account_id,
        rules: body.forwarding_rules ?? body.rules ?? [],
        rulesField:
          body.forwarding_rules !== undefined || body.rules === undefined ? "forwarding_rules" : "rules",
        targets: body.targets ?? [],
      });
      switch (result.outcome) {
        case "created":
          return result.loadBalancer;
        case "invalid":
        case "not_found":
        case "conflict":
        case "rejected":
          throw cloudError(result);
      }
    },
  );

  app.get(
    "/network/load_balancers",
    {
      config: { storedDataOnly: true },
      schema: {
        ...doc("listLoadBalancers", "load balancers", "List load balancers of the location"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.LoadBalancerView) },
      },
    },
    async (request) => cloud.loadBalancers.list(callerOf(cloud, request)),
  );

  app.get(
    "/network/load_balancers/:load_balancer_uuid",
    {
      config: { storedDataOnly: true },
      schema: {
        ...doc("getLoadBalancer", "load balancers", "Get a load balancer"),
        params: LbParams,
        response: { ...cloudErrorResponses, 200: S.LoadBalancerView },
      },
    },
    async (request) => {
      const result = await cloud.loadBalancers.get(
        callerOf(cloud, request),
        request.params.load_balancer_uuid,
      );
      switch (result.outcome) {
        case "found":
          return result.loadBalancer;
        case "not_found":
          throw cloudError(result);
      }
    },
  );

  app.patch(
    "/network/load_balancers/:load_balancer_uuid",
    {
      schema: {
        ...doc("updateLoadBalancer", "load balancers", "Rename a load balancer"),
        params: LbParams,
        body: S.UpdateLoadBalancerBody,
        response: { ...cloudErrorResponses, 200: S.LoadBalancerView },
      },
    },
    async (request) =>
      updated(
        await cloud.loadBalancers.update(callerOf(cloud, request), request.params.load_balancer_uuid, {
          displayName: request.body.display_name,
        }),
      ),
  );

  app.put(
    "/network/load_balancers/:load_balancer_uuid/billing_account",
    {
      schema: {
        ...doc(
          "setLoadBalancerBillingAccount",
          "load balancers",
          "Charge a load balancer to another billing account",
        ),
        params: LbParams,
        body: S.SetBillingBody,
        response: { ...cloudErrorResponses, 200: S.LoadBalancerView },
      },
    },
    async (request) =>
      updated(
        await cloud.loadBalancers.setBilling(
          callerOf(cloud, request),
          request.params.load_balancer_uuid,
          request.body.set_id,
        ),
      ),
  );

  app.delete(
    "/network/load_balancers/:load_balancer_uuid",
    {
      schema: {
        ...doc("deleteLoadBalancer", "load balancers", "Delete a load balancer"),
        params: LbParams,
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) =>
      removed(await cloud.loadBalancers.delete(callerOf(cloud, request), request.params.load_balancer_uuid)),
  );

  app.post(
    "/network/load_balancers/:load_balancer_uuid/targets",
    {
      schema: {
        ...doc("addLoadBalancerTarget", "load balancers", "Add a VM target"),
        params: LbParams,
        body: S.TargetBody,
        response: { ...cloudErrorResponses, 200: S.TargetView },
      },
    },
    async (request) => {
      const caller = callerOf(cloud, request);
      const result = await cloud.loadBalancers.addTarget(
        caller,
        request.params.load_balancer_uuid,
        request.body,
      );
      switch (result.outcome) {
        case "added":
          return result.target;
        case "not_found":
        case "conflict":
        case "rejected":
          throw cloudError(result);
      }
    },
  );

  app.delete(
    "/network/load_balancers/:load_balancer_uuid/targets/:target_uuid",
    {
      schema: {
        ...doc("removeLoadBalancerTarget", "load balancers", "Remove a target"),
        params: params({ load_balancer_uuid: Uuid, target_uuid: Uuid }),
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) => {
      const { load_balancer_uuid, target_uuid } = request.params;
      return removed(
        await cloud.loadBalancers.removeTarget(callerOf(cloud, request), load_balancer_uuid, target_uuid),
      );
    },
  );

  app.post(
    "/network/load_balancers/:load_balancer_uuid/forwarding_rules",
    {
      schema: {
        ...doc("addForwardingRule", "load balancers", "Add a forwarding rule"),
        params: LbParams,
        body: S.RuleBody,
        response: { ...cloudErrorResponses, 200: S.RuleView },
      },
    },
    async (request) => {
      const caller = callerOf(cloud, request);
      const result = await cloud.loadBalancers.addRule(
        caller,
        request.params.load_balancer_uuid,
        request.body,
      );
      switch (result.outcome) {
        case "added":
          return result.rule;
        case "not_found":
        case "invalid":
        case "conflict":
        case "rejected":
          throw cloudError(result);
      }
    },
  );

  app.delete(
    "/network/load_balancers/:load_balancer_uuid/forwarding_rules/:rule_uuid",
    {
      schema: {
        ...doc("removeForwardingRule", "load balancers", "Remove a forwarding rule"),
        params: params({ load_balancer_uuid: Uuid, rule_uuid: Uuid }),
        response: { ...cloudErrorResponses, 200: S.CloudSuccess },
      },
    },
    async (request) => {
      const { load_balancer_uuid, rule_uuid } = request.params;
      return removed(
        await cloud.loadBalancers.removeRule(callerOf(cloud, request), load_balancer_uuid, rule_uuid),
      );
    },
  );
};
