import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { cloudErrorResponses } from "../../http/schemas.ts";
import * as S from "../schemas.ts";
import { type CloudRouteOptions, routeKit } from "./common.ts";

/** `/config/locations` and `/payment/billing_account/list`. */
export const configRoutes: FastifyPluginAsyncTypebox<CloudRouteOptions> = async (app, { cloud, at }) => {
  const { doc, noParams } = routeKit(at);

  app.get(
    "/config/locations",
    {
      schema: {
        ...doc("listLocations", "config", "List locations"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.LocationView) },
      },
    },
    async () => cloud.locations.list(),
  );

  app.get(
    "/payment/billing_account/list",
    {
      config: { storedDataOnly: true },
      schema: {
        ...doc("listBillingAccounts", "billing", "List the organization's billing accounts"),
        ...noParams,
        response: { ...cloudErrorResponses, 200: Type.Array(S.BillingAccountView) },
      },
    },
    async (request) => cloud.billing.list(request.auth),
  );
};
