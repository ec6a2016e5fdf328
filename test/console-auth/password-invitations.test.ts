import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OffsetClock } from "../../src/clock.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import {
  adminOrganizationId,
  createConsoleUser,
  PASSWORD,
  sessionCookieOf,
  signIn,
  withSession,
} from "../support/console.ts";

const NEW_PASSWORD = "a much better passphrase";

describe("password change", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
    await createConsoleUser(t, { email: "pat@example.test" });
    await createConsoleUser(t, { email: "bystander@example.test" });
  });
  afterAll(() => t.close());

  it("refuses a wrong current password with a field error, changing nothing", async () => {
    const session = await signIn(t, "pat@example.test");
    const response = await t.request("PUT", "/v1/console/password", {
      ...withSession(session),
      json: { current_password: "not my password", new_password: NEW_PASSWORD },
    });
    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      success: false,
      message: "Invalid Request",
      errors: [
        { field: "current_password", code: "validation_credentials", message: "The password is not correct" },
      ],
    });
    const short = await t.request("PUT", "/v1/console/password", {
      ...withSession(session),
      json: { current_password: PASSWORD, new_password: "short" },
    });
    expect(short.status).toBe(400);
    expect(short.body.errors[0]).toMatchObject({ field: "new_password", code: "validation_min" });
    // Both wrong: both reported at once, whether the schema or the service refuses the new one.
    for (const newPassword of ["short", "😀".repeat(9)]) {
      const both = await t.request("PUT", "/v1/console/password", {
        ...withSession(session),
        json: { current_password: "not my password", new_password: newPassword },
      });
      expect(both.status).toBe(400);
      expect(both.body.errors.map((e: { field: string }) => e.field).sort()).toEqual([
        "current_password",
        "new_password",
      ]);
    }
    expect((await t.request("GET", "/v1/console/session", withSession(session))).status).toBe(200);
    await signIn(t, "pat@example.test", PASSWORD);
  });

  it("needs the session and its CSRF token", async () => {
    const session = await signIn(t, "pat@example.test");
    const body = { current_password: PASSWORD, new_password: NEW_PASSWORD };
    expect((await t.request("PUT", "/v1/console/password", { anonymous: true, json: body })).status).toBe(
      401,
    );
    const noCsrf = await t.request("PUT", "/v1/console/password", {
      ...withSession(session, false),
      json: body,
    });
    expect(noCsrf.status).toBe(403);
    expect(noCsrf.body.code).toBe("csrf_token_invalid");
    // An API key does not stand for a person.
    expect((await t.request("PUT", "/v1/console/password", { json: body })).status).toBe(401);
  });

  it("ends every session of the user, keeping this tab signed in with a new cookie", async () => {
    const here = await signIn(t, "pat@example.test");
    const elsewhere = await signIn(t, "pat@example.test");
    const bystander = await signIn(t, "bystander@example.test");
    const response = await t.request("PUT", "/v1/console/password", {
      ...withSession(here),
      json: { current_password: PASSWORD, new_password: NEW_PASSWORD },
    });
    expect(response.status).toBe(204);
    const renewed = sessionCookieOf(response.headers);
    expect(renewed?.setCookie).toMatch(/; HttpOnly; SameSite=Strict$/);
    expect(renewed?.cookie).not.toBe(here.cookie);

    expect((await t.request("GET", "/v1/console/session", withSession(here))).status).toBe(401);
    expect((await t.request("GET", "/v1/media/libraries", withSession(elsewhere))).status).toBe(401);
    expect((await t.request("GET", "/v1/console/session", withSession(bystander))).status).toBe(200);
    const current = await t.request("GET", "/v1/console/session", {
      anonymous: true,
      headers: { cookie: renewed?.cookie ?? "" },
    });
    expect(current.status).toBe(200);
    expect(current.body.data.user.email).toBe("pat@example.test");

    const old = await t.request("POST", "/v1/console/session", {
      anonymous: true,
      json: { email: "pat@example.test", password: PASSWORD },
    });
    expect(old.status).toBe(401);
    await signIn(t, "pat@example.test", NEW_PASSWORD);
  });
});

describe("a read-only user's own account", () => {
  it("may change their password and sign out", async () => {
    const t = await startTestApp();
    try {
      await createConsoleUser(t, { email: "ro@example.test", readOnly: true });
      const session = await signIn(t, "ro@example.test");
      const changed = await t.request("PUT", "/v1/console/password", {
        ...withSession(session),
        json: { current_password: PASSWORD, new_password: NEW_PASSWORD },
      });
      expect(changed.status).toBe(204);
      const renewed = sessionCookieOf(changed.headers);
      const current = await t.request("GET", "/v1/console/session", {
        anonymous: true,
        headers: { cookie: renewed?.cookie ?? "" },
      });
      expect(current.body.data.user.read_only).toBe(true);
      const out = await t.request("DELETE", "/v1/console/session", {
        anonymous: true,
        headers: { cookie: renewed?.cookie ?? "", "x-csrf-token": current.body.data.csrf_token },
      });
      expect(out.status).toBe(204);
    } finally {
      await t.close();
    }
  });
});

describe("invitations", () => {
  let t: TestApp;
  const clock = new OffsetClock();
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_PUBLIC_URL: "http://console.example.invalid:8080/" }, { clock });
  });
  afterAll(() => t.close());

  async function invite(email: string) {
    const result = await t.cumulo.services.console.createUser({
      organizationId: await adminOrganizationId(t),
      email,
      readOnly: false,
    });
    if (result.outcome !== "created" || !result.invitation_url) throw new Error("no invitation");
    expect(result.user.status).toBe("invited");
    expect(result.invitation_url).toMatch(
      /^http:\/\/console\.example\.invalid:8080\/console\/invite#[\w-]{43}$/,
    );
    return result.invitation_url.split("#")[1] ?? "";
  }

  it("lets no one sign in before the password is chosen", async () => {
    await invite("new@example.test");
    const response = await t.request("POST", "/v1/console/session", {
      anonymous: true,
      json: { email: "new@example.test", password: PASSWORD },
    });
    expect(response.status).toBe(401);
  });

  it("is accepted once: it sets the password and signs in", async () => {
    const token = await invite("once@example.test");
    const accepted = await t.request("POST", "/v1/console/invitations/accept", {
      anonymous: true,
      json: { token, password: PASSWORD },
    });
    expect(accepted.status).toBe(201);
    expect(accepted.body.data.user.email).toBe("once@example.test");
    const cookie = sessionCookieOf(accepted.headers);
    expect(cookie?.setCookie).toMatch(/; HttpOnly; SameSite=Strict$/);
    const me = await t.request("GET", "/v1/console/session", {
      anonymous: true,
      headers: { cookie: cookie?.cookie ?? "" },
    });
    expect(me.status).toBe(200);

    const again = await t.request("POST", "/v1/console/invitations/accept", {
      anonymous: true,
      json: { token, password: "someone else's choice" },
    });
    expect(again.status).toBe(400);
    expect(again.body.errors[0]).toMatchObject({ field: "token", code: "validation_credentials" });
    // A refused password is reported together with the used invitation.
    const both = await t.request("POST", "/v1/console/invitations/accept", {
      anonymous: true,
      json: { token, password: "short" },
    });
    expect(both.body.errors.map((error: { field: string }) => error.field).sort()).toEqual([
      "password",
      "token",
    ]);
    // The first password stands.
    await signIn(t, "once@example.test", PASSWORD);
    const stolen = await t.request("POST", "/v1/console/session", {
      anonymous: true,
      json: { email: "once@example.test", password: "someone else's choice" },
    });
    expect(stolen.status).toBe(401);
  });

  it("expires after 72 hours", async () => {
    const token = await invite("late@example.test");
    clock.offsetMs = 72 * 60 * 60 * 1000 + 1000;
    try {
      const response = await t.request("POST", "/v1/console/invitations/accept", {
        anonymous: true,
        json: { token, password: PASSWORD },
      });
      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual([
        { field: "token", code: "validation_credentials", message: "This invitation has expired" },
      ]);
    } finally {
      clock.offsetMs = 0;
    }
    const users = await t.cumulo.services.console.listUsers(await adminOrganizationId(t));
    expect(users?.find((user) => user.email === "late@example.test")?.status).toBe("invited");
  });

  it("refuses an unknown token and a short password", async () => {
    const unknown = await t.request("POST", "/v1/console/invitations/accept", {
      anonymous: true,
      json: { token: "not-a-token", password: PASSWORD },
    });
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors[0].field).toBe("token");
    const token = await invite("short@example.test");
    const short = await t.request("POST", "/v1/console/invitations/accept", {
      anonymous: true,
      json: { token, password: "123" },
    });
    expect(short.status).toBe(400);
    expect(short.body.errors[0]).toMatchObject({ field: "password", code: "validation_min" });
    // The invitation still works after a refused password.
    const accepted = await t.request("POST", "/v1/console/invitations/accept", {
      anonymous: true,
      json: { token, password: PASSWORD },
    });
    expect(accepted.status).toBe(201);
  });
});
