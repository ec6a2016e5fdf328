import { randomBytes, timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";

/**
 * Requests this process sends itself through `app.inject` on an operator's behalf (developer mode's
 * seed) carry this header with a secret made when the process starts, which never leaves it. They
 * are the operator's work, not the key's: the key's request budget does not count them, so a seed
 * larger than `CUMULO_RATE_LIMIT` is made whole and leaves the seeded keys their full budget, and
 * developer mode's fault rules do not hit them.
 */
const HEADER = "x-cumulo-self-request";
const SECRET = randomBytes(32);

/** The header that marks a request as sent by this process to itself. */
export const selfRequestHeaders = (): Record<string, string> => ({
  [HEADER]: SECRET.toString("base64url"),
});

/** Whether the request carries this process's own mark (any other value is an ordinary request). */
export function isSelfRequest(request: FastifyRequest): boolean {
  const given = request.headers[HEADER];
  if (typeof given !== "string") return false;
  const bytes = Buffer.from(given, "base64url");
  return bytes.length === SECRET.length && timingSafeEqual(bytes, SECRET);
}
