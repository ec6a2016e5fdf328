import { createCumuloClient } from "@cumulo/client";

let csrfToken: string | undefined;

/** The console's one way to the API: the typed client, authenticated by the session cookie + CSRF token. */
export const api = createCumuloClient({ baseUrl: window.location.origin, csrfToken: () => csrfToken });

export function setCsrfToken(token: string | undefined) {
  csrfToken = token;
}

let sessionEnded: (() => void) | undefined;

/**
 * Called when the API answers 401 to anything but a sign-in: the session ended (signed out or a
 * password changed in another tab, expired), so the console goes to sign-in rather than showing errors.
 */
export function onSessionEnded(listener: (() => void) | undefined) {
  sessionEnded = listener;
}

api.use({
  onResponse({ request, response }) {
    const signingIn = request.method === "POST" && new URL(request.url).pathname === "/v1/console/session";
    if (response.status === 401 && !signingIn) sessionEnded?.();
  },
});

/** Field name (dotted path, as the API reports it) to the message shown beside that field. */
export type FieldErrors = Record<string, string>;

/** An API answer that was not a success, with what the page needs to show it. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly fieldErrors: FieldErrors,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

/**
 * The API's field message as shown beside its field: "The forwarding_rules.0.source_port field must
 * be at most 65535." reads "This field must be at most 65535." (the API's path means nothing there).
 */
function besideItsField(field: string, message: string): string {
  const named = `The ${field} field `;
  return message.startsWith(named) ? `This field ${message.slice(named.length)}` : message;
}

/** A field message about one line of a list typed one item a line: "Line 2 has an invalid format." */
const aboutLine = (line: number, message: string): string =>
  message.startsWith("This field ")
    ? `Line ${line} ${message.slice("This field ".length)}`
    : `Line ${line}: ${message}`;

/**
 * The errors of a list typed one item a line (`paths.2`, `referrers.values.0`), each about its line,
 * in line order, or the list's own error: every refused line at once, as the API reports them (only
 * the first was shown, so a second wrong line was learnt of only after the first was corrected).
 * `lineOf` gives the line an item came from, where blank lines were left out of the list sent.
 */
export function errorsOfLines(
  errors: FieldErrors,
  field: string,
  lineOf: (index: number) => number = (index) => index + 1,
): string | undefined {
  if (errors[field]) return errors[field];
  const lines = Object.entries(errors)
    .map(([name, message]) => ({ index: Number(name.slice(field.length + 1)), name, message }))
    .filter(({ name, index }) => name.startsWith(`${field}.`) && Number.isInteger(index))
    .sort((one, other) => one.index - other.index)
    .map(({ index, message }) => aboutLine(lineOf(index), message));
  return lines.length > 0 ? lines.join(" ") : undefined;
}

/**
 * Reads the error bodies of every API group: media, CDN and webhooks list
 * `errors: [{field, code, message}]`; cloud answers `errors: {field: text}` (CONTRACT.md).
 */
export function failureOf(status: number, body: unknown): ApiFailure {
  const record = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const fieldErrors: FieldErrors = {};
  const errors = record.errors;
  if (Array.isArray(errors)) {
    for (const item of errors) {
      const { field, message } = (item ?? {}) as { field?: unknown; message?: unknown };
      if (typeof field === "string") {
        fieldErrors[field] = typeof message === "string" ? besideItsField(field, message) : "Invalid";
      }
    }
  } else if (typeof errors === "object" && errors !== null) {
    for (const [field, message] of Object.entries(errors)) {
      if (field !== "Error" && typeof message === "string")
        fieldErrors[field] = besideItsField(field, message);
    }
  }
  const message = typeof record.message === "string" ? record.message : withoutMessage(status);
  const code = typeof record.code === "string" ? record.code : undefined;
  return new ApiFailure(status, message, fieldErrors, code);
}

/**
 * An answer without the API's body (a proxy's HTML page, an empty body) in words a person can act on;
 * "Request failed (502)" said neither what failed nor what to do.
 */
function withoutMessage(status: number): string {
  if (status === 0) return "The server could not be reached";
  if (status >= 500) return `The server could not answer (HTTP ${status}). Try again in a moment.`;
  return `The server refused the request (HTTP ${status}).`;
}

interface ClientResult<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** Awaits a client call: its body on success, an `ApiFailure` thrown otherwise. */
export async function call<T>(request: Promise<ClientResult<T>>): Promise<T> {
  let result: ClientResult<T>;
  try {
    result = await request;
  } catch {
    throw failureOf(0, undefined);
  }
  if (!result.response.ok) {
    const failure = failureOf(result.response.status, result.error);
    const wait = waitOf(result.response.headers.get("retry-after"));
    if (result.response.status === 429 && wait) {
      throw new ApiFailure(429, `${failure.message}: try again in ${wait}.`, {}, failure.code);
    }
    throw failure;
  }
  return result.data as T;
}

/** The API answered 404: what was asked for does not exist (any more), and asking again will not help. */
export const isMissing = (error: unknown): error is ApiFailure =>
  error instanceof ApiFailure && error.status === 404;

/**
 * Awaits a removal (Delete, Revoke, Release). A 404 means that what was to be removed is gone
 * already (removed in another tab, or by someone else): what was asked is done, so the page goes on
 * to read its list again, instead of showing "Resource not found" and offering the same action again.
 */
export async function removing<T>(request: Promise<ClientResult<T>>): Promise<void> {
  try {
    await call(request);
  } catch (error) {
    if (!isMissing(error)) throw error;
  }
}

/** A 429's `Retry-After` (seconds) in words: "40 seconds", "12 minutes". */
function waitOf(retryAfter: string | null): string | undefined {
  const seconds = Number(retryAfter);
  if (!retryAfter || !Number.isFinite(seconds) || seconds <= 0) return undefined;
  if (seconds < 60) return `${Math.ceil(seconds)} second${Math.ceil(seconds) === 1 ? "" : "s"}`;
  const minutes = Math.ceil(seconds / 60);
  return `${minutes} minute${minutes === 1 ? "" : "s"}`;
}

/** The text to show for any thrown value. */
export const messageOf = (error: unknown): string =>
  error instanceof Error ? error.message : "Something went wrong";
