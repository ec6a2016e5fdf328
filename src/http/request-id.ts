import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";

// Any visible ASCII (trace ids, UUIDs, base64): echoed as given; anything else is replaced.
const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/** The request's `X-Request-Id`: the caller's when it is safe to echo, a new UUID otherwise. */
export function requestId(request: IncomingMessage): string {
  const given = request.headers["x-request-id"];
  return typeof given === "string" && REQUEST_ID.test(given) ? given : randomUUID();
}
