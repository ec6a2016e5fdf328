import { KEY_PREFIX } from "../identity/keys.ts";

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
 * Body fields and query parameters whose values are credentials, compared case-insensitively: keys
 * (`key`, `apikey`, `api_key`, `api-key`, `AccessKey` as Bunny names it, `private_key`, any name
 * ending in `key`), secrets, passwords, tokens, signatures (`sig` is an Azure shared access
 * signature's), credentials (`cred`, `X-Amz-Credential`), `auth` and its forms, and sessions
 * (`sessionid`, `PHPSESSID`, `sid`).
 */
const SECRET_FIELD =
  /secret|passw(or)?d|^pwd$|token|key$|signature|^sig$|cred(ential)?s?$|^auth$|^auth[-_]|authori[sz]ation|session|sessid|^sid$|^jwt$/i;
export const MASK = "***";

/**
 * A header, body field or query parameter named for a credential: the secret headers' names also
 * as fields (a webhook endpoint's custom `Authorization`), the fields' patterns also as headers
 * (`AuthorizationSignature`, `X-CSRF-Token`).
 */
export const isSecretName = (name: string): boolean =>
  SECRET_FIELD.test(name) || SECRET_HEADERS.has(name.toLowerCase());

/** A value that is a Cumulo API key (`cmk_...`), whatever it is named. */
const isApiKey = (value: string): boolean => value.startsWith(KEY_PREFIX);

/** Whether a query parameter holds a credential: by its name, or a Cumulo API key by its value. */
export const isSecretParam = (name: string, value: string): boolean =>
  isSecretName(name) || isApiKey(value) || isApiKey(name);

/**
 * Credentials among query parameters (a playback token, a signature, an API key under any name)
 * become the mask; true when any did. A bare `?cmk_...` (a key sent as a name) is masked whole.
 */
function maskParams(params: URLSearchParams): boolean {
  const entries = [...params];
  if (!entries.some(([name, value]) => isSecretParam(name, value))) return false;
  for (const [name] of entries) params.delete(name);
  for (const [name, value] of entries) {
    if (!isSecretParam(name, value)) params.append(name, value);
    else if (isApiKey(name)) params.append(MASK, "");
    else params.append(name, MASK);
  }
  return true;
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
