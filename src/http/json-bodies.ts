import type { FastifyInstance, FastifyRequest } from "fastify";
import { noResource } from "./error-handler.ts";
import { ApiError } from "./errors.ts";

/**
 * Whether JSON text nests objects and arrays deeper than `maxDepth`. One pass over the text,
 * before it is parsed, so a hostile body never becomes a deep structure that later code walks.
 */
export function nestsDeeperThan(text: string, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const char = text.charCodeAt(index);
    if (inString) {
      if (char === 0x5c)
        index++; // backslash: the next character is escaped
      else if (char === 0x22) inString = false;
    } else if (char === 0x22) {
      inString = true;
    } else if (char === 0x7b || char === 0x5b) {
      if (++depth > maxDepth) return true;
    } else if (char === 0x7d || char === 0x5d) {
      depth--;
    }
  }
  return false;
}

/** Whether a request carries a body: a length other than 0 (`00` is 0 too), or chunks. */
export const sendsBody = (request: FastifyRequest): boolean =>
  Number(request.headers["content-length"] ?? 0) !== 0 || request.headers["transfer-encoding"] !== undefined;

/** A body in a content coding: the answer names the only one taken (RFC 9110, 15.5.16). */
const UNSUPPORTED_CODING = new ApiError(415, "Unsupported Media Type", {
  headers: { "accept-encoding": "identity" },
});

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)"?/i;

/**
 * Whether the body is declared in a charset other than UTF-8: JSON is UTF-8 (RFC 8259), and so is
 * every form the API reads; such a body would be misread, so it is refused.
 */
export function declaresOtherCharset(request: FastifyRequest): boolean {
  const charset = CHARSET.exec(request.headers["content-type"] ?? "")?.[1];
  return charset !== undefined && !/^utf-?8$/i.test(charset);
}

/**
 * Body parsing for every group: no operation takes plain text, so such a body is 415 (never a
 * validation error), and an empty body sent with `Content-Type: application/json` (as many clients
 * do on deletes and other operations without a body) is read as no body at all. Malformed JSON,
 * and JSON nested deeper than `maxDepth`, stays 400; a charset other than UTF-8 is 415, and so is a
 * body with a `Content-Encoding` other than `identity`.
 */
export function acceptJsonBodies(app: FastifyInstance, options: { maxDepth: number }): void {
  // No operation takes a compressed body (RFC 9110 answers an unsupported coding with 415): read as
  // it stands, a body declared gzip or br would be misread, or taken as plain text it is not.
  // A callback hook: it runs on every request, and an async one would cost each a promise.
  app.addHook("preParsing", (request, _reply, payload, done) => {
    if (!sendsBody(request)) {
      done(null, payload);
      return;
    }
    // A body sent to a path that names nothing is not read: the 404 comes first (a malformed one was
    // answered 400). Here, in the hook every request with a body passes before it is parsed; bodyless
    // ones reach the not-found handler.
    if (request.is404) {
      done(noResource(request));
      return;
    }
    const encoding = request.headers["content-encoding"];
    if (encoding !== undefined && !/^\s*identity\s*$/i.test(encoding)) {
      done(UNSUPPORTED_CODING);
      return;
    }
    done(null, payload);
  });
  app.removeContentTypeParser("text/plain");
  // A type no parser here takes: 415 for a body of it; without a body there is nothing to refuse,
  // and the request is read as one sent without a type (a form's type on a delete, say).
  app.addContentTypeParser("*", (request, _payload, done) => {
    if (sendsBody(request)) return done(ApiError.unsupportedMediaType(), undefined);
    return done(null, undefined);
  });
  // `__proto__` and `constructor.prototype` keys are dropped as they are read: unknown fields are
  // ignored (the contract), and these could otherwise reach an object's prototype.
  const parseJson = app.getDefaultJsonParser("remove", "remove");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = body as string;
    // No body: no charset to misread either.
    if (text.trim() === "") return done(null, undefined);
    if (declaresOtherCharset(request)) return done(ApiError.unsupportedMediaType(), undefined);
    if (nestsDeeperThan(text, options.maxDepth)) return done(ApiError.invalidRequest(), undefined);
    return parseJson(request, text, (error, value) => {
      // Every operation's body is an object of fields: a list or a bare value is as malformed for
      // one that takes no body as for one that does (docs/decisions.md).
      if (!error && (typeof value !== "object" || value === null || Array.isArray(value))) {
        return done(ApiError.invalidRequest(), undefined);
      }
      return done(error, value);
    });
  });
}
