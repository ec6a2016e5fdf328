import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createConsoleUser, PASSWORD, sessionCookieOf } from "../support/console.ts";

describe("console sign-in and sessions", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
    await createConsoleUser(t, { email: "Ada@Example.test" });
  });
  afterAll(() => t.close());

  it("signs in with email (any case) and password, setting an HttpOnly SameSite=Strict cookie", async () => {
    const response = await t.request("POST", "/v1/console/session", {
      anonymous: true,
      json: { email: "  ada@example.TEST ", password: PASSWORD },
    });
    expect(response.status).toBe(201);
    expect(response.body.success).toBe(true);
    expect(response.body.data.user).toMatchObject({ email: "ada@example.test", read_only: false });
    expect(response.body.data.organization.name).toBe("Default");
    expect(response.body.data.csrf_token).toMatch(/^[\w-]{43}$/);
    const cookie = sessionCookieOf(response.headers);
    expect(cookie?.setCookie).toMatch(
      /^cumulo_session=[\w-]{43}; Max-Age=604800; Path=\/; HttpOnly; SameSite=Strict$/,
    );
    const current = await t.request("GET", "/v1/console/session", {
      anonymous: true,
      headers: { cookie: cookie?.cookie ?? "" },
    });
    expect(current.status).toBe(200);
    expect(current.body.data).toEqual(response.body.data);
  });
});
