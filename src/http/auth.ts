import { isIP } from "node:net";
import type { CookieSerializeOptions } from "@fastify/cookie";
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { AuthContext, IdentityService, SessionIdentity } from "../identity/service.ts";
import {
  csrfTokenMatches,
  SECURE_SESSION_COOKIE,
  SESSION_COOKIE,
  SESSION_LIFETIME_MS,
} from "../identity/sessions.ts";
import { ApiError } from "./errors.ts";
import { schemeOf } from "./scheme.ts";

/** Which API a route belongs to: decides accepted credential headers and error body shapes. */
export type ApiGroup = "media" | "cdn" | "livestream" | "cloud";

declare module "fastify" {
  interface FastifyRequest {
    apiGroup: ApiGroup | undefined;
    /** Set on every authenticated route before validation runs. */
    auth: AuthContext;
    /**
     * Whether the browser reaches Cumulo over HTTPS: the request came over TLS, or the public URL
     * (the address behind a TLS-terminating proxy) is https.
     */
    overHttps: boolean;
  }
  interface FastifyContextConfig {
    /**
     * A write that changes nothing and lets a person see what they may read (a playback token to
     * watch a private video): read-only users may make it, read-only API keys may not.
     */
    forReadOnlyUsers?: boolean;
    /**
     * A `GET` that may write (it creates what it answers when that is missing, as SPEC.md asks of
     * `GET /storage/user`): a cookie-authenticated request needs the session's CSRF token, as an
     * unsafe method does, since a page on the same site can make the browser send it.
     */
    mayWrite?: boolean;
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

/** Over HTTPS only the `__Host-` cookie is read: a copy of the plain one is anybody's. */
export const sessionCookieName = (request: FastifyRequest): string =>
  request.overHttps ? SECURE_SESSION_COOKIE : SESSION_COOKIE;

/**
 * Every value of the session cookie the request carries, in order. A browser sends one per path
 * and domain the name was set for, so a page sharing the console's cookies (a sibling subdomain,
 * another port of the host) can add its own, before or after the console's; the cookie parser
 * would keep only one of them.
 */
export function sessionCookieValues(request: FastifyRequest): string[] {
  const values = (request.headers.cookie ?? "").split(";").flatMap((pair) => {
    const equals = pair.indexOf("=");
    if (equals === -1 || pair.slice(0, equals).trim() !== sessionCookieName(request)) return [];
    const value = pair.slice(equals + 1).trim();
    return value === "" ? [] : [value];
  });
  return [...new Set(values)];
}

/** What `generateToken` makes: other values name no session and are not looked up. */
const SESSION_TOKEN = /^[\w-]{43}$/;

/**
 * How the session cookie is set: never readable by scripts, never sent by other sites, and `Secure`
 * when the browser reaches Cumulo over HTTPS (docs/console.md).
 */
export const sessionCookieOptions = (request: FastifyRequest): CookieSerializeOptions => ({
  httpOnly: true,
  sameSite: "strict",
  path: "/",
  secure: request.overHttps,
  maxAge: SESSION_LIFETIME_MS / 1000,
});

/**
 * Where a copy of the session cookie may have been set and still reach this request: each path
 * leading to it, host-only or with a domain (the host's or one above it). Expiring the cookie in
 * all of them is all a server can do about a copy planted with another path or domain; a browser
 * ignores the scopes it holds no cookie in or that the host may not set. A `__Host-` cookie has
 * one scope only.
 */
export function sessionCookieScopes(request: FastifyRequest): { path: string; domain?: string }[] {
  if (request.overHttps) return [{ path: "/" }];
  const segments = (request.url.split("?")[0] ?? "").split("/").filter((segment) => segment !== "");
  const paths = ["/"];
  segments.forEach((segment, index) => {
    const path = `${paths.at(-1)?.replace(/\/$/, "")}/${segment}`;
    // A cookie for `/v1/` reaches `/v1/console`; one for `/v1/console/` does not reach `/v1/console`.
    paths.push(path, ...(index < segments.length - 1 ? [`${path}/`] : []));
  });
  const labels = isIP(request.hostname) ? [] : request.hostname.split(".");
  const domains = labels.slice(0, -1).map((_, index) => labels.slice(index).join("."));
  return [undefined, ...domains].flatMap((domain) =>
    paths.map((path) => (domain ? { path, domain } : { path })),
  );
}

const CSRF_HEADER = "x-csrf-token";

/** Whether a cookie-authenticated request must carry its session's CSRF token: any write. */
const needsCsrfToken = (request: FastifyRequest): boolean =>
  !READ_METHODS.has(request.method) || request.routeOptions.config.mayWrite === true;

const sessionEnded = () =>
  ApiError.unauthorized("The console session has ended: sign in again", "session_expired");

/**
 * The live session of the request's session cookies, or undefined when it has none (docs/console.md).
 * Cookies naming no live session are passed over, so a planted one cannot shut the person out; if
 * none is left, 401. The session whose CSRF token `X-CSRF-Token` carries is the one the request
 * runs as; an unsafe method (or a `GET` that may write, `mayWrite`) without one is 403, since a
 * browser sends the cookie whoever made the page that sends the request. A read without one runs as the first live session, unless they
 * belong to different users: then one was planted to make the person act as someone else, and
 * which cannot be told, so both end (anyone holding a cookie may end its session) and it is 401.
 */
export async function authenticateSessionCookie(
  request: FastifyRequest,
  identity: IdentityService,
): Promise<{ token: string; session: SessionIdentity } | undefined> {
  const values = sessionCookieValues(request);
  if (values.length === 0) return undefined;
  const live = await identity.liveSessions(values.filter((value) => SESSION_TOKEN.test(value)));
  const first = live[0];
  if (!first) throw sessionEnded();
  const presented = header(request, CSRF_HEADER);
  let chosen = live.find((session) => csrfTokenMatches(session.token, presented));
  if (!chosen) {
    if (needsCsrfToken(request)) {
      throw new ApiError(403, "Missing or wrong X-CSRF-Token header for this session", {
        error: "forbidden",
        code: "csrf_token_invalid",
      });
    }
    const userIds = [...new Set(live.map((session) => session.identity.auth.userId))];
    if (userIds.length > 1) {
      request.log.warn({ userIds }, "session cookies of several users: one was planted; all ended");
      await identity.endSessions(live.map((session) => session.token));
      throw sessionEnded();
    }
    chosen = first;
  }
  await identity.useSession(chosen);
  return { token: chosen.token, session: chosen.identity };
}

/**
 * Who sends the request: the key in one of `group`'s headers, or else the console session cookie
 * (with its CSRF token on writes). Read-only keys and users may only read. Throws the contract's
 * 401/403 otherwise, and 429 to an address that sent too many wrong keys (`FailedAuthThrottle`).
 */
export async function authenticateRequest(
  request: FastifyRequest,
  group: ApiGroup,
  identity: IdentityService,
): Promise<AuthContext> {
  request.server.failedAuth.refuseIfThrottled(request);
  const secret = presentedKey(request, group);
  const auth = secret
    ? await identity.authenticate(secret)
    : (await authenticateSessionCookie(request, identity))?.session.auth;
  if (!secret && !auth) {
    throw group === "cloud"
      ? ApiError.unauthorized("No API key found in request")
      : ApiError.unauthorized(MISSING_MEDIA_CREDENTIAL, "auth_type_not_found");
  }
  if (!auth) {
    if (secret) await request.server.failedAuth.countWrongKey(request, secret);
    throw ApiError.unauthorized("Invalid authentication credentials");
  }
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

export function registerAuthDecorators(app: FastifyInstance, publicUrl?: string): void {
  app.decorateRequest("apiGroup", undefined);
  app.decorateRequest("auth", undefined as unknown as AuthContext);
  const behindHttps = publicUrl?.startsWith("https:") === true;
  app.decorateRequest("overHttps", {
    getter(this: FastifyRequest) {
      return schemeOf(this) === "https" || behindHttps;
    },
  });
}
