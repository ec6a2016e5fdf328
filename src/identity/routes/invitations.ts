import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { sessionCookieName, sessionCookieOptions } from "../../http/auth.ts";
import { clientNetwork } from "../../http/client-address.ts";
import { ok } from "../../http/envelope.ts";
import { ApiError } from "../../http/errors.ts";
import { Envelope, mediaErrorResponses } from "../../http/schemas.ts";
import { bodyField } from "../../http/validation.ts";
import { invitationError } from "../console-service.ts";
import { AcceptInvitationBody, ConsoleSession } from "../schemas.ts";
import { type ConsoleRouteOptions, tags } from "./common.ts";

/** `/v1/console/invitations`: an invited user chooses a password through the link they were given. */
export const invitationRoutes: FastifyPluginAsyncTypebox<ConsoleRouteOptions> = async (
  app,
  { console, signInLimit },
) => {
  app.post(
    "/invitations/accept",
    {
      schema: {
        operationId: "acceptConsoleInvitation",
        tags,
        summary: "Accept an invitation: set the password and sign in (sets the session cookie)",
        body: AcceptInvitationBody,
        response: { ...mediaErrorResponses, 201: Envelope(ConsoleSession) },
      },
      config: {
        // A password the schema refuses is reported together with what is wrong with the invitation.
        fieldChecks: async (body) => {
          const token = bodyField(body, "token");
          return typeof token === "string" && token !== "" ? console.invitationErrors(token) : [];
        },
        rateLimit: {
          max: signInLimit.max,
          timeWindow: signInLimit.windowMs,
          keyGenerator: (request) => `invitation:ip:${clientNetwork(request.ip)}`,
        },
      },
    },
    async (request, reply) => {
      const result = await console.acceptInvitation(request.body.token, request.body.password);
      switch (result.outcome) {
        case "accepted":
          reply.setCookie(sessionCookieName(request), result.token, sessionCookieOptions(request));
          return reply.code(201).send(ok("Invitation accepted", result.session));
        case "invalid":
          throw ApiError.validation(result.errors);
        case "expired":
        case "not_found":
          throw ApiError.validation([invitationError(result.outcome)]);
      }
    },
  );
};
