import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { authenticateSessionCookie, sessionCookieOptions } from "../../http/auth.ts";
import { ok } from "../../http/envelope.ts";
import { ApiError } from "../../http/errors.ts";
import { Envelope, mediaErrorResponses } from "../../http/schemas.ts";
import { normalizeEmail, sessionView } from "../console-service.ts";
import { ConsoleSession, SignInBody } from "../schemas.ts";
import { SESSION_COOKIE } from "../sessions.ts";
import { type ConsoleRouteOptions, consoleSecurity, tags } from "./common.ts";

/** `/v1/console/session`: sign in, the current session, sign out. */
export const sessionRoutes: FastifyPluginAsyncTypebox<ConsoleRouteOptions> = async (
  app,
  { identity, console, signInLimit, publicUrl },
) => {
  // Per client address (the route's budget) and per email (below), so neither many addresses
  // against one account nor one address against many accounts can guess for long.
  const limitByEmail = app.createRateLimit({
    max: signInLimit.max,
    timeWindow: signInLimit.windowMs,
    keyGenerator: (request) =>
      `sign-in:email:${normalizeEmail((request.body as { email?: string } | undefined)?.email ?? "")}`,
  });

  app.post(
    "/session",
    {
      schema: {
        operationId: "signIn",
        tags,
        summary: "Sign in to the console with email and password (sets the session cookie)",
        body: SignInBody,
        response: { ...mediaErrorResponses, 201: Envelope(ConsoleSession) },
      },
      config: {
        rateLimit: {
          max: signInLimit.max,
          timeWindow: signInLimit.windowMs,
          keyGenerator: (request) => `sign-in:ip:${request.ip}`,
        },
      },
      preHandler: async (request) => {
        const limit = await limitByEmail(request);
        if (!limit.isAllowed && limit.isExceeded) {
          // The contract's 429, with the headers of the budget that ran out (not the address's).
          const reset = String(limit.ttlInSeconds);
          throw new ApiError(429, "Too many requests", {
            error: "rate_limited",
            headers: {
              "retry-after": reset,
              "ratelimit-limit": String(signInLimit.max),
              "ratelimit-remaining": "0",
              "ratelimit-reset": reset,
            },
          });
        }
      },
    },
    async (request, reply) => {
      const result = await console.signIn(request.body.email, request.body.password);
      switch (result.outcome) {
        case "signed_in":
          reply.setCookie(SESSION_COOKIE, result.token, sessionCookieOptions(request, publicUrl));
          return reply.code(201).send(ok("Signed in", result.session));
        case "invalid_credentials":
          throw ApiError.unauthorized("Wrong email or password", "invalid_credentials");
      }
    },
  );

  app.get(
    "/session",
    {
      schema: {
        operationId: "getConsoleSession",
        tags,
        summary: "The signed-in user, organization and CSRF token of the session cookie",
        security: consoleSecurity,
        response: { ...mediaErrorResponses, 200: Envelope(ConsoleSession) },
      },
    },
    async (request) => {
      const current = await authenticateSessionCookie(request, identity);
      if (!current) throw ApiError.unauthorized("Not signed in", "not_signed_in");
      return ok("Session", sessionView(current.token, current.session));
    },
  );

  app.delete(
    "/session",
    {
      schema: {
        operationId: "signOut",
        tags,
        summary: "Sign out: end the session and clear its cookie",
        security: consoleSecurity,
        response: { ...mediaErrorResponses, 204: Type.Null() },
      },
    },
    async (request, reply) => {
      // A live session ends only with its CSRF token; a cookie of an ended one is just cleared.
      const current = await authenticateSessionCookie(request, identity).catch((error: unknown) => {
        if (error instanceof ApiError && error.status === 401) return undefined;
        throw error;
      });
      if (current) await console.signOut(current.token);
      reply.clearCookie(SESSION_COOKIE, sessionCookieOptions(request, publicUrl));
      return reply.code(204).send(null);
    },
  );
};
