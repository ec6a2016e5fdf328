import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { requireApiKey } from "../../http/auth.ts";
import type { IdentityService } from "../../identity/service.ts";
import type { CloudRouteOptions } from "./common.ts";
import { configRoutes } from "./config.ts";
import { diskRoutes } from "./disks.ts";
import { floatingIpRoutes } from "./floating-ips.ts";
import { loadBalancerRoutes } from "./load-balancers.ts";
import { objectStorageRoutes } from "./object-storage.ts";
import { cloudRequestPipeline } from "./pipeline.ts";
import { tokenRoutes } from "./tokens.ts";
import { vmRoutes } from "./vms.ts";

export { CLOUD_PREFIXES, type CloudPrefix } from "./common.ts";

/** Every cloud route under one of the four prefixes: `apikey`/`X-API-Key`, bare cloud bodies. */
export const cloudRoutes: FastifyPluginAsyncTypebox<
  CloudRouteOptions & { identity: IdentityService; maxJsonDepth: number }
> = async (app, { cloud, identity, at, maxJsonDepth }) => {
  await cloudRequestPipeline(app, cloud.locations, maxJsonDepth);
  requireApiKey(app, "cloud", identity);
  // Children get the services only: passing the options on would repeat this plugin's prefix.
  const children = { cloud, at };
  await app.register(configRoutes, children);
  await app.register(tokenRoutes, children);
  await app.register(vmRoutes, children);
  await app.register(diskRoutes, children);
  await app.register(floatingIpRoutes, children);
  await app.register(loadBalancerRoutes, children);
  await app.register(objectStorageRoutes, children);
};
