/** Headers whose values are credentials. */
const SECRET_HEADERS = new Set([
  "authorization",
  "proxy-authorization",
  "apikey",
  "x-api-key",
  "cookie",
  "set-cookie",
]);
/** Body fields and query parameters whose values are credentials (keys, webhook and S3 secrets, tokens). */
const SECRET_FIELD = /secret|password|token|^api_?key$|^key$|access_key|signature/i;
export const MASK = "***";

/**
 * A header, body field or query parameter named for a credential: the secret headers' names also
 * as fields (a webhook endpoint's custom `Authorization`), the fields' patterns also as headers
 * (`AuthorizationSignature`, `X-CSRF-Token`).
 */
export const isSecretName = (name: string): boolean =>
  SECRET_FIELD.test(name) || SECRET_HEADERS.has(name.toLowerCase());

/** Credentials among query parameters (a playback token, a signature) become the mask; true when any did. */
function maskParams(params: URLSearchParams): boolean {
  let masked = false;
  for (const name of [...params.keys()]) {
    if (isSecretName(name)) {
      params.set(name, MASK);
      masked = true;
    }
  }
  return masked;
}

/** A URL with the credentials of its query masked; true when it had any. */
export const maskQuery = (url: URL): boolean => maskParams(url.searchParams);

/** A request's path and query as it may be logged: credentials in the query masked, the rest as sent. */
export function loggableUrl(pathAndQuery: string): string {
  const at = pathAndQuery.indexOf("?");
  if (at === -1) return pathAndQuery;
  const params = new URLSearchParams(pathAndQuery.slice(at + 1));
  return maskParams(params) ? `${pathAndQuery.slice(0, at)}?${params}` : pathAndQuery;
}

/**
 * A URL as written, with its credentials masked and the rest untouched: the password of its user
 * info (`user:***@`) and the credential-named parameters of its query (`?token=***`). For a URL a
 * read-only key is shown that Cumulo calls (a webhook endpoint, an import).
 */
export function urlWithoutCredentials(text: string): string {
  const hashAt = text.indexOf("#");
  const [beforeHash, hash] = hashAt === -1 ? [text, ""] : [text.slice(0, hashAt), text.slice(hashAt)];
  let masked = beforeHash;
  const authority = /^([a-z][a-z\d+.-]*:\/\/)([^/?#]*)/i.exec(beforeHash);
  if (authority) {
    const [whole, scheme = "", server = ""] = authority;
    const at = server.lastIndexOf("@");
    const colon = server.indexOf(":");
    if (colon !== -1 && colon < at) {
      masked = `${scheme}${server.slice(0, colon + 1)}${MASK}${server.slice(at)}${beforeHash.slice(whole.length)}`;
    }
  }
  return loggableUrl(masked) + hash;
}
