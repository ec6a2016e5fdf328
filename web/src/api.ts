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
      if (typeof field === "string") fieldErrors[field] = typeof message === "string" ? message : "Invalid";
    }
  } else if (typeof errors === "object" && errors !== null) {
    for (const [field, message] of Object.entries(errors)) {
      if (field !== "Error" && typeof message === "string") fieldErrors[field] = message;
    }
  }
  const message =
    typeof record.message === "string"
      ? record.message
      : status === 0
        ? "The server could not be reached"
        : `Request failed (${status})`;
  const code = typeof record.code === "string" ? record.code : undefined;
  return new ApiFailure(status, message, fieldErrors, code);
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
  if (!result.response.ok) throw failureOf(result.response.status, result.error);
  return result.data as T;
}

/** The text to show for any thrown value. */
export const messageOf = (error: unknown): string =>
  error instanceof Error ? error.message : "Something went wrong";
