import type { FastifyInstance } from "fastify";

/**
 * Body parsing for every group: no operation takes plain text, so such a body is 415 (never a
 * validation error), and an empty body sent with `Content-Type: application/json` (as many clients
 * do on deletes and other operations without a body) is read as no body at all. Malformed JSON
 * stays 400.
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
