import formbody from "@fastify/formbody";
import type { ErrorObject } from "ajv";
import type { FastifyError, FastifyInstance, FastifyRequest } from "fastify";
import { NO_ROUTE } from "../../http/error-handler.ts";
import { ApiError } from "../../http/errors.ts";
import { parseFormText } from "../../http/form-text.ts";
import { lowerCaseIdFields } from "../../http/identifiers.ts";
import { declaresOtherCharset, sendsBody } from "../../http/json-bodies.ts";
import { markRepeated, unstorableTextErrors } from "../../http/validation.ts";
import { asSent, coerceObject, type SentIndexes } from "../coerce.ts";
import type { Locations } from "../locations.ts";

/** What a path parameter names, for the 404 of a malformed one. */
const PATH_THINGS: Record<string, string> = {
  disk_uuid: "Disk",
  public_ipv4_address: "IP address",
  load_balancer_uuid: "Load balancer",
  target_uuid: "Target",
  rule_uuid: "Forwarding rule",
};

/** Where a form's bracketed list indexes are not the items' places (`coerce.ts`), per request. */
const sentIndexesOf = new WeakMap<FastifyRequest, SentIndexes>();
/** Requests whose body is a form, where a key given twice arrives as a list, as in a query. */
const formBodies = new WeakSet<FastifyRequest>();

/**
 * What the cloud API does to a request beyond the shared pipeline of src/http/: an unknown location
 * is no route, bodies come form-urlencoded or as JSON with form text coerced to the declared types
 * (coerce.ts), and a malformed path identifier is 404 naming the kind of resource.
 * `onRequest` hooks added here run before the key check the caller adds after it.
 */
export async function cloudRequestPipeline(
  app: FastifyInstance,
  locations: Locations,
  maxDepth: number,
): Promise<void> {
  // An unknown location slug is a route that does not exist, checked before the key. This hook and
  // the body's below are synchronous: a callback hook costs no promise per request.
  app.addHook("onRequest", (request, _reply, done) => {
    request.apiGroup = "cloud";
    const slug = (request.params as { location?: string }).location;
    if (slug !== undefined && !locations.has(slug)) {
      return done(new ApiError(404, NO_ROUTE, { body: { message: NO_ROUTE } }));
    }
    done();
  });
  // A form declared in another charset would be read as UTF-8 and stored changed (QA of 4 December:
  // Latin-1 "café" became "caf\uFFFD"): 415, as for JSON.
  app.addHook("preParsing", (request, _reply, payload, done) => {
    const form = /^\s*application\/x-www-form-urlencoded\b/i.test(request.headers["content-type"] ?? "");
    if (form && sendsBody(request) && declaresOtherCharset(request))
      return done(ApiError.unsupportedMediaType());
    done(null, payload);
  });
  await app.register(formbody, { parser: parseFormText });

  app.setErrorHandler((error: FastifyError, request) => {
    const sentIndexes = sentIndexesOf.get(request);
    if (error.validation && error.validationContext === "body" && sentIndexes) {
      // A field is named as the form sent it: `forwarding_rules.3.source_port`, not its place in the list.
      for (const issue of error.validation) issue.instancePath = asSent(issue.instancePath, sentIndexes);
    }
    if (error.validation && error.validationContext === "body" && formBodies.has(request)) {
      markRepeated(error.validation as ErrorObject[]);
    }
    if (error.validation && error.validationContext === "params") {
      const param = error.validation
        .map((issue) => issue.instancePath.replace(/^\//, "") || String(issue.params.missingProperty ?? ""))
        .find((name) => PATH_THINGS[name] !== undefined);
      if (param) throw ApiError.notFound(PATH_THINGS[param]);
    }
    throw error;
  });

  app.addHook("preValidation", (request, _reply, done) => {
    const schema = request.routeOptions.schema?.body as Parameters<typeof coerceObject>[0] | undefined;
    if (!schema) return done();
    const body = request.body;
    // JSON `null` is a value, not an absent body: refused below as an array is.
    if (body === undefined || body === "") {
      request.body = {};
    } else if (typeof body === "object" && body !== null && !Array.isArray(body)) {
      const fromForm = /application\/x-www-form-urlencoded/i.test(request.headers["content-type"] ?? "");
      const sentIndexes: SentIndexes = new Map();
      // Ids in form brackets (`targets[0][target_uuid]`) exist only once expanded.
      request.body = lowerCaseIdFields(
        schema,
        coerceObject(
          schema,
          body as Record<string, unknown>,
          fromForm ? { maxDepth, sentIndexes } : undefined,
        ),
      );
      if (sentIndexes.size > 0) sentIndexesOf.set(request, sentIndexes);
      if (fromForm) {
        formBodies.add(request);
        // Text in a field's JSON text (`public_keys=["a\u0000"]`) exists only once parsed, after the
        // check of every request's text (app.ts): it is refused as that check refuses it.
        const unstorable = unstorableTextErrors(request.body);
        if (unstorable.length > 0) return done(ApiError.validation(unstorable));
      }
    }
    // Anything else (a JSON array, string or number) fails validation as an invalid request.
    done();
  });
}
