import type { TestApp } from "./app.ts";

/** A console user's password in tests (10-200 characters). */
export const PASSWORD = "correct horse battery";

export interface SignedIn {
  /** `cumulo_session=<value>` (over HTTPS `__Host-cumulo_session=`), as a browser sends it back. */
  cookie: string;
  /** The whole Set-Cookie header of the sign-in answer. */
  setCookie: string;
  csrf: string;
  session: {
    user: { id: number; uuid: string; email: string; read_only: boolean };
    organization: { id: string; name: string };
    csrf_token: string;
  };
}

/** The organization of the test app's admin key. */
export async function adminOrganizationId(t: TestApp): Promise<string> {
  const auth = await t.cumulo.services.identity.authenticate(t.adminKey);
  if (!auth) throw new Error("admin key not accepted");
  return auth.organizationId;
}

/** A console user made through the service (as `cumulo users create` does), with a password. */
export async function createConsoleUser(
  t: TestApp,
  options: { email: string; organizationId?: string; readOnly?: boolean; password?: string },
) {
  const result = await t.cumulo.services.console.createUser({
    organizationId: options.organizationId ?? (await adminOrganizationId(t)),
    email: options.email,
    readOnly: options.readOnly ?? false,
    password: options.password ?? PASSWORD,
  });
  if (result.outcome !== "created") throw new Error(`user not created: ${JSON.stringify(result)}`);
  return result.user;
}

/** The session cookie set by an answer, as `name=value` to send back. */
export function sessionCookieOf(headers: Headers): { cookie: string; setCookie: string } | undefined {
  const setCookie = headers.getSetCookie().find((value) => /^(__Host-)?cumulo_session=/.test(value));
  if (!setCookie) return undefined;
  return { cookie: setCookie.split(";")[0] ?? "", setCookie };
}

export async function signIn(t: TestApp, email: string, password = PASSWORD): Promise<SignedIn> {
  const response = await t.request("POST", "/v1/console/session", {
    anonymous: true,
    json: { email, password },
  });
  const cookie = sessionCookieOf(response.headers);
  if (response.status !== 201 || !cookie) throw new Error(`sign-in: ${response.status} ${response.text}`);
  return { ...cookie, csrf: response.body.data.csrf_token, session: response.body.data };
}

/** Headers of a request made with the session, as the console sends them (CSRF token unless told not to). */
export const withSession = (
  session: Pick<SignedIn, "cookie" | "csrf">,
  csrf: string | false = session.csrf,
) => ({
  anonymous: true,
  headers: { cookie: session.cookie, ...(csrf === false ? {} : { "x-csrf-token": csrf }) },
});
