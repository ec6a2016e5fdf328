/** Headers whose values are credentials. */
export const SECRET_HEADERS = new Set([
  "authorization",
  "proxy-authorization",
  "apikey",
  "x-api-key",
  "cookie",
  "set-cookie",
]);
/** Body fields and query parameters whose values are credentials (keys, webhook and S3 secrets, tokens). */
export const SECRET_FIELD = /secret|password|token|^api_?key$|^key$|access_key|signature/i;
export const MASK = "***";

/** Credentials a URL's query carries (a playback token, a signature) become the mask; true when any did. */
export function maskQuery(url: URL): boolean {
  let masked = false;
  for (const name of [...url.searchParams.keys()]) {
    if (SECRET_FIELD.test(name) || SECRET_HEADERS.has(name.toLowerCase())) {
      url.searchParams.set(name, MASK);
      masked = true;
    }
  }
  return masked;
}

/** A request's path and query as it may be logged: credentials in the query masked, the rest as sent. */
export function loggableUrl(pathAndQuery: string): string {
  if (!pathAndQuery.includes("?")) return pathAndQuery;
  const url = new URL(pathAndQuery, "http://cumulo.invalid");
  return maskQuery(url) ? `${url.pathname}${url.search}` : pathAndQuery;
}
