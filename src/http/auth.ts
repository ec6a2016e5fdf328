import type { CookieSerializeOptions } from "@fastify/cookie";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AuthContext, IdentityService, SessionIdentity } from "../identity/service.ts";
import { csrfTokenMatches, SESSION_COOKIE, SESSION_LIFETIME_MS } from "../identity/sessions.ts";
import { ApiError } from "./errors.ts";

/** Which API a route belongs to: decides accepted credential headers and error body shapes. */
export type ApiGroup = "media" | "cdn" | "livestream" | "cloud";

declare module "fastify" {
  interface FastifyRequest {
    apiGroup: ApiGroup | undefined;
    /** Set on every authenticated route before validation runs. */
    auth: AuthContext;
  }
  interface FastifyContextConfig {
    /**
     * A write that changes nothing and lets a person see what they may read (a playback token to
     * watch a private video): read-only users may make it, read-only API keys may not.
     */
    forReadOnlyUsers?: boolean;
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

const SESSION_COOKIES = new RegExp(`(?:^|;)\\s*${SESSION_COOKIE}=`, "g");

/** Stands for a doubled session cookie: names no session, so it is refused as an ended one. */
const DOUBLED_SESSION = "doubled";

/**
 * The console session cookie's value, if the request carries one. Two of them (one set by another
 * site sharing the domain, with another path) are no session, as a forged one is: the parser would
 * take whichever comes first, and the planted one can be made to come first.
 */
function sessionToken(request: FastifyRequest): string | undefined {
  const token = request.cookies[SESSION_COOKIE];
  if (!token) return undefined;
  return (request.headers.cookie?.match(SESSION_COOKIES)?.length ?? 0) > 1 ? DOUBLED_SESSION : token;
}

/**
 * How the session cookie is set: never readable by scripts, never sent by other sites, and `Secure`
 * when the browser reaches Cumulo over HTTPS: the request came over TLS, or the public URL (the
 * address behind a TLS-terminating proxy) is https (docs/console.md).
 */
export const sessionCookieOptions = (
  request: FastifyRequest,
  publicUrl: string | undefined,
): CookieSerializeOptions => ({
  httpOnly: true,
  sameSite: "strict",
  path: "/",
  secure: request.protocol === "https" || publicUrl?.startsWith("https:") === true,
  maxAge: SESSION_LIFETIME_MS / 1000,
});

const CSRF_HEADER = "x-csrf-token";

/**
 * The live session of the request's cookie, or undefined when it has none. A cookie that names no
 * live session is 401; an unsafe method without the session's CSRF token in `X-CSRF-Token` is 403,
 * since a browser sends the cookie whoever made the page that sends the request.
 */
export async function authenticateSessionCookie(
  request: FastifyRequest,
  identity: IdentityService,
): Promise<{ token: string; session: SessionIdentity } | undefined> {
  const token = sessionToken(request);
  if (!token) return undefined;
  const session = await identity.authenticateSession(token);
  if (!session)
    throw ApiError.unauthorized("The console session has ended: sign in again", "session_expired");
  if (!READ_METHODS.has(request.method) && !csrfTokenMatches(token, header(request, CSRF_HEADER))) {
    throw new ApiError(403, "Missing or wrong X-CSRF-Token header for this session", {
      error: "forbidden",
      code: "csrf_token_invalid",
    });
  }
  return { token, session };
}

/**
 * Who sends the request: the key in one of `group`'s headers, or else the console session cookie
 * (with its CSRF token on writes). Read-only keys and users may only read. Throws the contract's
 * 401/403 otherwise.
 */
export async function authenticateRequest(
  request: FastifyRequest,
  group: ApiGroup,
  identity: IdentityService,
): Promise<AuthContext> {
  const secret = presentedKey(request, group);
  const auth = secret
    ? await identity.authenticate(secret)
    : (await authenticateSessionCookie(request, identity))?.session.auth;
  if (!secret && !auth) {
    throw group === "cloud"
      ? ApiError.unauthorized("No API key found in request")
      : ApiError.unauthorized(MISSING_MEDIA_CREDENTIAL, "auth_type_not_found");
  }
  if (!auth) throw ApiError.unauthorized("Invalid authentication credentials");
  const person = auth.sessionId !== undefined;
  if (
    auth.readOnly &&
    !READ_METHODS.has(request.method) &&
    !(person && request.routeOptions.config.forReadOnlyUsers)
  ) {
    throw ApiError.forbidden(person ? "This user is read-only" : "This API key is read-only");
  }
  return auth;
}

/**
 * Marks every route registered in `app` (an encapsulated plugin) as part of `group` and
 * authenticates every request (`authenticateRequest`).
 */
export function requireApiKey(app: FastifyInstance, group: ApiGroup, identity: IdentityService): void {
  app.addHook("onRequest", async (request) => {
    request.apiGroup = group;
    request.auth = await authenticateRequest(request, group, identity);
  });
}

export function registerAuthDecorators(app: FastifyInstance): void {
  app.decorateRequest("apiGroup", undefined);
  app.decorateRequest("auth", undefined as unknown as AuthContext);
}
