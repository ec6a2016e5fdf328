import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AuthContext, IdentityService } from "../identity/service.ts";
import { ApiError } from "./errors.ts";

/** Which API a route belongs to: decides accepted credential headers and error body shapes. */
export type ApiGroup = "media" | "cdn" | "livestream" | "cloud";

declare module "fastify" {
  interface FastifyRequest {
    apiGroup: ApiGroup | undefined;
    /** Set on every authenticated route before validation runs. */
    auth: AuthContext;
  }
}

export const MISSING_MEDIA_CREDENTIAL =
  "Could not determine the authentication type: provide a valid Authorization or X-API-Key header.";
const READ_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

const header = (request: FastifyRequest, name: string): string | undefined => {
  const value = request.headers[name];
  const text = Array.isArray(value) ? value[0] : value;
  return text?.trim() || undefined;
};

function bearer(request: FastifyRequest): string | undefined {
  const value = header(request, "authorization");
  const match = value ? /^Bearer\s+(\S+)$/i.exec(value) : null;
  return match?.[1];
}

/** The presented key, from the headers this group accepts (names are case-insensitive). */
export function presentedKey(request: FastifyRequest, group: ApiGroup): string | undefined {
  if (group === "cloud") return header(request, "apikey") ?? header(request, "x-api-key");
  return bearer(request) ?? header(request, "x-api-key");
}

/**
 * A cloud route, with or without a location segment (valid or not), and anything under the cloud
 * group prefix `/v1/cloud`.
 */
export const isCloudPath = (url: string): boolean =>
  /^\/v1\/cloud(\/|\?|$)/.test(url) ||
  /^\/v1(\/[^/?]+)?\/(user-resource|network|storage|config|payment)(\/|\?|$)/.test(url);

/**
 * Marks every route registered in `app` (an encapsulated plugin) as part of `group` and requires a
 * valid key for it; read-only keys may only read.
 */
export function requireApiKey(app: FastifyInstance, group: ApiGroup, identity: IdentityService): void {
  app.addHook("onRequest", async (request) => {
    request.apiGroup = group;
    const secret = presentedKey(request, group);
    if (!secret) {
      throw group === "cloud"
        ? ApiError.unauthorized("No API key found in request")
        : ApiError.unauthorized(MISSING_MEDIA_CREDENTIAL, "auth_type_not_found");
    }
    const auth = await identity.authenticate(secret);
    if (!auth) throw ApiError.unauthorized("Invalid authentication credentials");
    if (auth.readOnly && !READ_METHODS.has(request.method)) {
      throw ApiError.forbidden("This API key is read-only");
    }
    request.auth = auth;
  });
}

export function registerAuthDecorators(app: FastifyInstance): void {
  app.decorateRequest("apiGroup", undefined);
  app.decorateRequest("auth", undefined as unknown as AuthContext);
}
