import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { ConsoleRouteOptions } from "./common.ts";
import { invitationRoutes } from "./invitations.ts";
import { passwordRoutes } from "./password.ts";
import { sessionRoutes } from "./session.ts";

/**
 * `/v1/console`: signing in and out of the console. Authenticated by the session cookie only (API
 * keys do not sign in); answers in the media envelope. docs/console.md has the decisions.
 */
export const consoleRoutes: FastifyPluginAsyncTypebox<ConsoleRouteOptions> = async (app, options) => {
  app.addHook("onRequest", async (request) => {
    request.apiGroup = "media";
  });
  const { identity, console, signInLimit } = options;
  const children = { identity, console, signInLimit };
  await app.register(sessionRoutes, children);
  await app.register(passwordRoutes, children);
  await app.register(invitationRoutes, children);
};
