import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { requireApiKey } from "../../http/auth.ts";
import type { MediaRouteOptions } from "./common.ts";
import { fileRoutes } from "./files.ts";
import { folderRoutes } from "./folders.ts";
import { libraryRoutes } from "./libraries.ts";
import { migrationRoutes } from "./migration.ts";
import { playerRoutes } from "./players.ts";
import { videoRoutes } from "./videos.ts";

/** Every `/v1/media` route: authenticated with Bearer or X-API-Key, answering in the media envelope. */
export const mediaRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (app, options) => {
  requireApiKey(app, "media", options.identity);
  // Children get the services only: passing `options` on would repeat this plugin's prefix.
  const { media, identity, config } = options;
  const children = { media, identity, config };
  await app.register(libraryRoutes, children);
  await app.register(folderRoutes, children);
  await app.register(videoRoutes, children);
  await app.register(playerRoutes, children);
  await app.register(migrationRoutes, children);
  await app.register(fileRoutes, children);
};
