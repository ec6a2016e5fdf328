import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  BlobStoreUnavailableError,
  isDiskUnavailable,
  STORAGE_RETRY_AFTER_S,
  STORAGE_UNAVAILABLE_MESSAGE,
} from "../blobs/store.ts";
import { BusUnavailableError } from "../bus.ts";
import { OrganizationGoneError } from "../identity/service.ts";
import { SecretKeyMismatchError } from "../secret-box.ts";
import { isMissingReference } from "../store/transactions.ts";
import { isStoreUnavailable, STORE_RETRY_AFTER_S, STORE_UNAVAILABLE_MESSAGE } from "../store/unavailable.ts";
import { type ApiGroup, isCloudPath } from "./auth.ts";
import { ApiError, type FieldError } from "./errors.ts";
import { toFieldErrors } from "./validation.ts";

declare module "fastify" {
  interface FastifyContextConfig {
    /**
     * The route's checks of body fields that a schema cannot make (where a URL resolves, say), which
     * its service makes once the schema has passed. When the schema refuses the body, they run on
     * the body as sent too, so every failing field is reported in one response. Each check looks
     * only at fields of the right type, and a field the schema refused is not reported twice.
     */
    fieldChecks?: (body: unknown, request: FastifyRequest) => Promise<FieldError[]>;
    /** The same for the query parameters a route's service checks (on the query as sent). */
    queryChecks?: (query: unknown) => FieldError[];
    /**
     * The path's parameters name what the request creates (a snapshot saved under a name), so a
     * refused one is the caller's field to correct, not a resource that does not exist.
     */
    paramsNameNewResource?: boolean;
  }
}

/** The cloud gateway's answer for a path that names no route. */
export const NO_ROUTE = "no route and no API found with those values";

const groupOf = (request: FastifyRequest): ApiGroup =>
  request.apiGroup ?? (isCloudPath(request.url) ? "cloud" : "media");

function mediaBody(error: ApiError): Record<string, unknown> {
  const { fieldErrors, error: kind, code } = error.options;
  if (fieldErrors) return { success: false, message: error.message, errors: fieldErrors };
  if (kind) return { success: false, error: kind, ...(code ? { code } : {}), message: error.message };
  if (error.status === 404) return { success: false, message: "Resource not found" };
  return { success: false, message: error.message };
}

function cloudBody(error: ApiError): Record<string, unknown> {
  const { fieldErrors, error: kind } = error.options;
  if (fieldErrors) {
    return {
      message: error.message,
      errors: Object.fromEntries(fieldErrors.map((f) => [f.field, f.message])),
    };
  }
  if (kind) return { error: kind, message: error.message };
  return { message: error.message, errors: { Error: error.message } };
}

/** The file's length, which a refused range must carry (RFC 9110, 15.5.17). */
function contentRangeOf(error: FastifyError): Record<string, string> | undefined {
  const range = (error as { headers?: Record<string, unknown> }).headers?.["Content-Range"];
  return typeof range === "string" ? { "content-range": range } : undefined;
}

/** Errors raised by Fastify itself (parsing, limits, schema validation), in the contract's terms. */
function fromFastify(error: FastifyError, request: FastifyRequest): ApiError | undefined {
  if (error.validation) {
    // A malformed id in the path names no resource.
    if (error.validationContext === "params" && !request.routeOptions.config?.paramsNameNewResource) {
      return ApiError.notFound();
    }
    // A body that is not an object of fields (an array, a string, null) names no field to blame.
    if (
      error.validationContext === "body" &&
      error.validation.some((e) => e.instancePath === "" && e.keyword === "type")
    ) {
      return ApiError.invalidRequest();
    }
    return ApiError.validation(toFieldErrors(error.validation as Parameters<typeof toFieldErrors>[0]));
  }
  switch (error.statusCode) {
    case 400:
      return ApiError.invalidRequest();
    case 404:
      return ApiError.notFound();
    case 405:
      return new ApiError(405, "Method Not Allowed");
    case 406:
      return new ApiError(406, "Not Acceptable");
    case 413:
      return ApiError.payloadTooLarge();
    case 415:
      return ApiError.unsupportedMediaType();
    // The console's files (@fastify/static) take conditional and range requests.
    case 412:
      return new ApiError(412, "Precondition Failed");
    case 416:
      return new ApiError(416, "Range Not Satisfiable", { headers: contentRangeOf(error) });
    default:
      return undefined;
  }
}

const INTERNAL = new ApiError(500, "Internal server error");

const STORAGE_UNAVAILABLE = new ApiError(503, STORAGE_UNAVAILABLE_MESSAGE, {
  error: "service_unavailable",
  headers: { "retry-after": String(STORAGE_RETRY_AFTER_S) },
});

const STORE_UNAVAILABLE = new ApiError(503, STORE_UNAVAILABLE_MESSAGE, {
  error: "service_unavailable",
  headers: { "retry-after": String(STORE_RETRY_AFTER_S) },
});

/** The caller can do nothing but wait for the operator (or reach a node given the right key). */
const SECRETS_UNREADABLE = new ApiError(
  503,
  "Stored secrets cannot be read on this server: its secret key is not the one they were stored with. The operator must restore it; try again later.",
  { error: "service_unavailable" },
);

/** The body of `error` in `group`'s shape. */
export const errorBody = (group: ApiGroup, error: ApiError): unknown =>
  error.options.body ?? (group === "cloud" ? cloudBody(error) : mediaBody(error));

/**
 * What the API listener answers when its HTTP parser refuses a request (src/http/listener.ts): the
 * group's shape when the request line was read, the media envelope otherwise.
 */
export const clientErrorBody = (status: number, message: string, path: string | undefined): object =>
  errorBody(
    path !== undefined && isCloudPath(path) ? "cloud" : "media",
    new ApiError(status, message),
  ) as object;

/** The challenge a 401 must carry (RFC 9110, 15.5.2): the scheme each group's keys travel in. */
const CHALLENGES: Record<ApiGroup, string> = {
  media: 'Bearer realm="Cumulo"',
  cdn: 'Bearer realm="Cumulo"',
  livestream: 'Bearer realm="Cumulo"',
  cloud: 'ApiKey realm="Cumulo", header="apikey"',
};

export function sendApiError(request: FastifyRequest, reply: FastifyReply, error: ApiError): FastifyReply {
  const group = groupOf(request);
  const body = errorBody(group, error);
  if (error.options.headers) reply.headers(error.options.headers);
  if (error.status === 401) reply.header("www-authenticate", CHALLENGES[group]);
  // Bodies are rendered here, not by the route's response schema, which describes successes.
  return reply
    .code(error.status)
    .type("application/json; charset=utf-8")
    .serializer(JSON.stringify)
    .send(body);
}

/** A path that names nothing: the cloud gateway's "no route" body, the media group's 404. */
export function noResource(request: FastifyRequest): ApiError {
  if (groupOf(request) !== "cloud") return ApiError.notFound();
  return new ApiError(404, NO_ROUTE, { body: { message: NO_ROUTE } });
}

/**
 * Errors the router raises before any route runs: a path it cannot decode (the app's `rewriteUrl`
 * leaves none: `withUndecodableSegmentsLiteral`) or with an overlong parameter names no resource,
 * like a malformed id; anything else is an invalid request.
 */
export function frameworkErrors(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const namesNothing = error.code === "FST_ERR_MAX_PARAM_LENGTH" || error.code === "FST_ERR_BAD_URL";
  reply.header("x-request-id", request.id);
  sendApiError(request, reply, namesNothing ? noResource(request) : ApiError.invalidRequest());
}

/** The route's own checks of the part its schema refused, when it has some for that part. */
function routeChecks(error: FastifyError, request: FastifyRequest): Promise<FieldError[]> | undefined {
  const { fieldChecks, queryChecks } = request.routeOptions.config ?? {};
  if (error.validationContext === "body" && fieldChecks) return fieldChecks(request.body, request);
  if (error.validationContext === "querystring" && queryChecks) {
    return Promise.resolve().then(() => queryChecks(request.query));
  }
  return undefined;
}

/** A refused body's or query's field errors and those of the route's own checks, in one error. */
async function withFieldChecks(
  error: FastifyError,
  request: FastifyRequest,
  apiError: ApiError,
): Promise<ApiError> {
  const { fieldErrors } = apiError.options;
  const checking = fieldErrors && routeChecks(error, request);
  if (!fieldErrors || !checking) return apiError;
  const refused = new Set(fieldErrors.map((fieldError) => fieldError.field));
  // The schema's errors stand on their own should a check fail.
  const checked = await checking.catch((): FieldError[] => []);
  const more = checked.filter((fieldError) => !refused.has(fieldError.field));
  return more.length > 0 ? ApiError.validation([...fieldErrors, ...more]) : apiError;
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    const apiError = error instanceof ApiError ? error : fromFastify(error, request);
    if (apiError) return sendApiError(request, reply, await withFieldChecks(error, request, apiError));
    // Media storage, or the node's own disk under a request (the secret key's first write) full or
    // read-only; a permission refused there is a misconfiguration, which stays a logged 500.
    if (error instanceof BlobStoreUnavailableError || isDiskUnavailable(error)) {
      request.log.warn({ err: error }, "request failed: media storage unavailable");
      return sendApiError(request, reply, STORAGE_UNAVAILABLE);
    }
    if (isStoreUnavailable(error) || error instanceof BusUnavailableError) {
      request.log.warn({ err: error }, "request failed: store or Redis unavailable");
      return sendApiError(request, reply, STORE_UNAVAILABLE);
    }
    if (error instanceof SecretKeyMismatchError) {
      request.log.error(
        { err: error },
        "request failed: a stored secret does not open with this node's secret key",
      );
      return sendApiError(request, reply, SECRETS_UNREADABLE);
    }
    if (isMissingReference(error) || error instanceof OrganizationGoneError) {
      // What the request names was deleted meanwhile: asked again, it would be a 404. Logged in case
      // a reference is wrong in the code instead.
      request.log.warn({ err: error }, "request failed: a row it refers to is gone");
      return sendApiError(request, reply, ApiError.notFound());
    }
    request.log.error({ err: error }, "request failed");
    return sendApiError(request, reply, INTERNAL);
  });

  app.setNotFoundHandler((request, reply) => sendApiError(request, reply, noResource(request)));
}
