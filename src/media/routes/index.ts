import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { requireApiKey } from "../../http/auth.ts";
import { acceptUploads } from "../../http/upload-bodies.ts";
import type { MediaRouteOptions } from "./common.ts";
import { folderRoutes } from "./folders.ts";
import { libraryRoutes } from "./libraries.ts";
import { migrationRoutes } from "./migration.ts";
import { playbackRoutes } from "./playback.ts";
import { playerRoutes } from "./players.ts";
import { securityRoutes } from "./security.ts";
import { subtitleRoutes } from "./subtitles.ts";
import { thumbnailRoutes } from "./thumbnails.ts";
import { videoSourceRoutes } from "./video-source.ts";
import { videoRoutes } from "./videos.ts";

/**
 * The routes that take files. `@fastify/multipart` is registered in this context only (with the
 * upload limits of `acceptUploads`), so JSON routes elsewhere answer 415 to multipart bodies; here a
 * body that is not multipart is 415.
 */
const fileTakingRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (app, options) => {
  await acceptUploads(app, options.config);
  await app.register(subtitleRoutes, options);
  await app.register(thumbnailRoutes, options);
  await app.register(videoSourceRoutes, options);
};

/**
 * Every `/v1/media` route but the webhooks (`webhooks/routes.ts`): authenticated with Bearer or
 * X-API-Key, answering in the media envelope. One file per resource, named after it.
 */
export const mediaRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (app, options) => {
  requireApiKey(app, "media", options.identity);
  // Children get the services only: passing `options` on would repeat this plugin's prefix.
  const { media, video, identity, config } = options;
  const children = { media, video, identity, config };
  await app.register(libraryRoutes, children);
  await app.register(securityRoutes, children);
  await app.register(folderRoutes, children);
  await app.register(videoRoutes, children);
  await app.register(playbackRoutes, children);
  await app.register(playerRoutes, children);
  await app.register(migrationRoutes, children);
  await app.register(fileTakingRoutes, children);
};
