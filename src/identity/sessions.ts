import { createHmac, timingSafeEqual } from "node:crypto";

/** The cookie that carries a console session over plain HTTP (docs/console.md). */
export const SESSION_COOKIE = "cumulo_session";
/**
 * The cookie that carries it over HTTPS. Browsers keep a `__Host-` cookie only if it is Secure,
 * host-only and for `/`, so no other host (a sibling subdomain) can plant a copy of it.
 */
export const SECURE_SESSION_COOKIE = `__Host-${SESSION_COOKIE}`;
/** A session unused this long ends (a working day of inactivity). */
export const SESSION_IDLE_MS = 8 * 60 * 60 * 1000;
/** A session ends this long after sign-in, however active. */
export const SESSION_LIFETIME_MS = 7 * 24 * 60 * 60 * 1000;
/** Activity is recorded at most this often, so reads do not each write to the store. */
export const SESSION_TOUCH_MS = 60 * 1000;
/** An invitation link works this long after `cumulo users create` printed it. */
export const INVITATION_LIFETIME_MS = 72 * 60 * 60 * 1000;

/**
 * The CSRF token of a session: an HMAC of the cookie's value. It is given to the console in the
 * session's body (the cookie itself is HttpOnly), needs no storage, and only someone who can read
 * a same-origin response can know it.
 */
export const csrfTokenFor = (sessionToken: string): string =>
  createHmac("sha256", sessionToken).update("cumulo-csrf").digest("base64url");

export function csrfTokenMatches(sessionToken: string, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  const expected = Buffer.from(csrfTokenFor(sessionToken));
  const actual = Buffer.from(presented);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}
