import { KEY_PREFIX } from "../identity/keys.ts";
import { PLAIN_PREFIX as SIGNING_SECRET_PREFIX } from "../webhooks/secrets.ts";

/** Headers whose values are credentials, though their names are no credential word. */
const SECRET_HEADERS = new Set(["cookie", "set-cookie"]);
/** Words that make a name a credential's wherever they stand in it (`auth_token`, `X-Amz-Credential`, `sessionId`). */
const SECRET_WORDS = new Set([
  "secret",
  "password",
  "passwd",
  "pwd",
  "token",
  "signature",
  "sig",
  "cred",
  "creds",
  "credential",
  "credentials",
  "auth",
  "authorization",
  "authorisation",
  "session",
  "sessionid",
  "sessid",
  "sid",
  "jwt",
  "passphrase",
  "otp",
]);
/** Words run together into one (`accesstoken`, `clientsecret`, `PHPSESSID`, `JSESSIONID`) that end in a credential word. */
const SECRET_ENDING = /(token|secret|passw(or)?d|signature|sessid|sessionid)$/;
/** `key` is a credential's as the name's last word (`api_key`, `X-Api-Key`, `AccessKey`), not in `key_id`; run together, after these words. */
const SECRET_KEY = /^(|api|access|private|secret|signing|auth|session|client|master|shared|app)key$/;

/**
 * The words of a name, lower-cased: split at anything but letters and digits (`_`, `-`, `.`) and
 * where camelCase starts a word (`accessKey`, `APIKey`, `sessionId`).
 */
const wordsOf = (name: string): string[] =>
  name
    .replace(/([a-z\d])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z\d]+/)
    .filter((word) => word !== "");

export const MASK = "***";

/**
 * A header, body field or query parameter named for a credential, compared by words (see
 * `wordsOf`), so that `sortkey`, `monkey`, `keyboard`, `authors` and `sessions` are not: a word
 * of `SECRET_WORDS` anywhere, a run-together word ending in one, or `key` as the last word.
 */
export function isSecretName(name: string): boolean {
  if (SECRET_HEADERS.has(name.toLowerCase())) return true;
  const words = wordsOf(name);
  const last = words.at(-1) ?? "";
  return SECRET_KEY.test(last) || words.some((word) => SECRET_WORDS.has(word) || SECRET_ENDING.test(word));
}

/** A value that is a Cumulo credential whatever it is named: an API key (`cmk_...`), a webhook signing secret (`whsec_...`). */
const isCumuloCredential = (value: string): boolean =>
  value.startsWith(KEY_PREFIX) || value.startsWith(SIGNING_SECRET_PREFIX);

/** Whether a query parameter holds a credential: by its name, or a Cumulo credential by its value. */
export const isSecretParam = (name: string, value: string): boolean =>
  isSecretName(name) || isCumuloCredential(value) || isCumuloCredential(name);

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
    else if (isCumuloCredential(name)) params.append(MASK, "");
    else params.append(name, MASK);
  }
  return true;
}

/** A path segment as sent, percent-decoded where it decodes. */
function decodedSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/**
 * A path with every segment that holds a Cumulo credential (a key sent where an id goes) masked:
 * anywhere in the segment and percent-decoded too (`Bearer%20cmk_...`, `cmk%5F...`).
 */
const maskPath = (path: string): string =>
  path
    .split("/")
    .map((segment) => {
      const decoded = decodedSegment(segment);
      return decoded.includes(KEY_PREFIX) || decoded.includes(SIGNING_SECRET_PREFIX) ? MASK : segment;
    })
    .join("/");

/** A URL with the credentials of its query and the Cumulo credentials of its path masked; true when it had any. */
export function maskUrl(url: URL): boolean {
  const path = maskPath(url.pathname);
  const inPath = path !== url.pathname;
  if (inPath) url.pathname = path;
  return maskParams(url.searchParams) || inPath;
}

/** A request's path and query as it may be logged: Cumulo credentials in the path and credentials in the query masked, the rest as sent. */
export function loggableUrl(pathAndQuery: string): string {
  const at = pathAndQuery.indexOf("?");
  if (at === -1) return maskPath(pathAndQuery);
  const params = new URLSearchParams(pathAndQuery.slice(at + 1));
  const path = maskPath(pathAndQuery.slice(0, at));
  return maskParams(params) ? `${path}?${params}` : `${path}${pathAndQuery.slice(at)}`;
}
