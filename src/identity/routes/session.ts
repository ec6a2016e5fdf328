import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyRequest } from "fastify";
import {
  authenticateSessionCookie,
  sessionCookieName,
  sessionCookieOptions,
  sessionCookieScopes,
  sessionCookieValues,
} from "../../http/auth.ts";
import { clientNetwork } from "../../http/client-address.ts";
import { ok } from "../../http/envelope.ts";
import { ApiError } from "../../http/errors.ts";
import { refuseOverBudget } from "../../http/rate-limit.ts";
import { Envelope, mediaErrorResponses } from "../../http/schemas.ts";
import { normalizeEmail, sessionView } from "../console-service.ts";
import { ConsoleSession, SignInBody } from "../schemas.ts";
import { type ConsoleRouteOptions, consoleSecurity, tags } from "./common.ts";

/** How many times the pair's budget one address, or one email, may spend in the window. */
const WIDER_SIGN_IN_BUDGET = 10;

/** `/v1/console/session`: sign in, the current session, sign out. */
export const sessionRoutes: FastifyPluginAsyncTypebox<ConsoleRouteOptions> = async (
  app,
  { identity, console, signInLimit },
) => {
  // Guessing is slowed per (client address, email) pair: a stranger using up the guesses on an
  // email does not shut its owner out. Wider budgets per address (one source trying many emails)
  // and per email (many sources on one account) catch what the pair cannot (docs/console.md).
  const emailOf = (request: FastifyRequest) =>
    normalizeEmail((request.body as { email?: string } | undefined)?.email ?? "");
  const limitByPair = app.createRateLimit({
    max: signInLimit.max,
    timeWindow: signInLimit.windowMs,
    // An address never holds a space, so the key names one pair.
    keyGenerator: (request) => `sign-in:pair:${clientNetwork(request.ip)} ${emailOf(request)}`,
  });
  const limitByEmail = app.createRateLimit({
    max: signInLimit.max * WIDER_SIGN_IN_BUDGET,
    timeWindow: signInLimit.windowMs,
    keyGenerator: (request) => `sign-in:email:${emailOf(request)}`,
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
          max: signInLimit.max * WIDER_SIGN_IN_BUDGET,
          timeWindow: signInLimit.windowMs,
          keyGenerator: (request) => `sign-in:ip:${clientNetwork(request.ip)}`,
        },
      },
      // The pair first: an attempt it refuses does not count against the owner's email.
      preHandler: async (request) => {
        await refuseOverBudget(limitByPair, request);
        await refuseOverBudget(limitByEmail, request);
      },
    },
    async (request, reply) => {
      const result = await console.signIn(request.body.email, request.body.password);
      switch (result.outcome) {
        case "signed_in":
          reply.setCookie(sessionCookieName(request), result.token, sessionCookieOptions(request));
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
      // Whoever holds a cookie may end its session: a planted one ends with the person's.
      if (current) await identity.endSessions(sessionCookieValues(request));
      const [name, options] = [sessionCookieName(request), sessionCookieOptions(request)];
      for (const scope of sessionCookieScopes(request)) reply.clearCookie(name, { ...options, ...scope });
      return reply.code(204).send(null);
    },
  );
};
