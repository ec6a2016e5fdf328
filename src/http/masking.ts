/** Headers whose values are credentials. */
const SECRET_HEADERS = new Set([
  "authorization",
  "proxy-authorization",
  "apikey",
  "x-api-key",
  "cookie",
  "set-cookie",
]);
/**
 * Body fields and query parameters whose values are credentials (keys, webhook and S3 secrets,
 * tokens, signatures; `sig` is an Azure shared access signature's).
 */
const SECRET_FIELD = /secret|password|token|^api_?key$|^key$|access_key|signature|^sig$/i;
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
