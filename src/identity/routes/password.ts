import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { authenticateSessionCookie, sessionCookieName, sessionCookieOptions } from "../../http/auth.ts";
import { ApiError } from "../../http/errors.ts";
import { mediaErrorResponses } from "../../http/schemas.ts";
import { bodyField } from "../../http/validation.ts";
import { ChangePasswordBody } from "../schemas.ts";
import { type ConsoleRouteOptions, consoleSecurity, tags } from "./common.ts";

/** `/v1/console/password`: the signed-in user changes their password. */
export const passwordRoutes: FastifyPluginAsyncTypebox<ConsoleRouteOptions> = async (
  app,
  { identity, console, signInLimit },
) => {
  app.put(
    "/password",
    {
      schema: {
        operationId: "changeConsolePassword",
        tags,
        summary: "Change the signed-in user's password; every other session of the user ends",
        security: consoleSecurity,
        body: ChangePasswordBody,
        response: { ...mediaErrorResponses, 204: Type.Null() },
      },
      // Checking the current password is a guess like a sign-in: the same budget, per user.
      config: {
        // A new password the schema refuses is reported together with a wrong current one.
        fieldChecks: async (body, request) => {
          const current = bodyField(body, "current_password");
          if (typeof current !== "string" || !request.auth) return [];
          return console.currentPasswordErrors(request.auth.userId, current);
        },
        rateLimit: {
          max: signInLimit.max,
          timeWindow: signInLimit.windowMs,
          keyGenerator: (request) => `password:user:${request.auth.userId}`,
        },
      },
      onRequest: async (request) => {
        const current = await authenticateSessionCookie(request, identity);
        if (!current) throw ApiError.unauthorized("Not signed in", "not_signed_in");
        request.auth = current.session.auth;
      },
    },
    async (request, reply) => {
      const result = await console.changePassword(
        request.auth.userId,
        request.body.current_password,
        request.body.new_password,
      );
      switch (result.outcome) {
        case "changed":
          // This tab stays signed in with a new session; every old one (this one's too) has ended.
          reply.setCookie(sessionCookieName(request), result.token, sessionCookieOptions(request));
          return reply.code(204).send(null);
        case "invalid":
          throw ApiError.validation(result.errors);
      }
    },
  );
};
