/**
 * Codes of a connection that reached no answer: the service, or the way to it, is down for now. A
 * name that does not resolve (`ENOTFOUND`, `EAI_AGAIN`) is one too: a resolver restarting or a
 * container network still coming up. Shared by the S3 store and the database's failure checks.
 */
export const CONNECTION_FAILURE_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
]);
