import type { FastifyInstance } from "fastify";

/**
 * Body parsing of the JSON operations in one plugin scope: a text body is 415 (not a validation
 * error), and an empty body sent with `Content-Type: application/json` (as many clients do on
 * deletes and other operations without a body) is read as no body, exactly as a request without a
 * body: fine where the body is optional, the usual validation error where it is required.
 * Malformed JSON stays 400.
 */
export function acceptJsonBodies(app: FastifyInstance): void {
  app.removeContentTypeParser("text/plain");
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    if ((body as string).trim() === "") return done(null, undefined);
    return parseJson(request, body as string, done);
  });
}
