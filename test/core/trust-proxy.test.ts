import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createConsoleUser, PASSWORD } from "../support/console.ts";

/** A sign-in attempt as a proxy in front of the API passes it on, naming the client and its scheme. */
async function signInVia(t: TestApp, forwarded: Record<string, string>, email: string, password: string) {
  return fetch(`${t.baseUrl}/v1/console/session`, {
    method: "POST",
    headers: { "content-type": "application/json", ...forwarded },
    body: JSON.stringify({ email, password }),
  });
}

const wrong = "a wrong password";
const from = (address: string) => ({ "x-forwarded-for": address });

/**
 * Behind a load balancer every request comes from its address: without CUMULO_TRUST_PROXY one
 * client's guesses spent everyone's sign-in budget. A trusted proxy's `X-Forwarded-*` name the
 * client; nobody else's do.
 */
describe("CUMULO_TRUST_PROXY", () => {
  let trusting: TestApp;
  let plain: TestApp;

  beforeAll(async () => {
    const env = { CUMULO_SIGN_IN_RATE_LIMIT: "1/15m" };
    [trusting, plain] = await Promise.all([
      startTestApp({ ...env, CUMULO_TRUST_PROXY: "127.0.0.1" }),
      startTestApp(env),
    ]);
    for (const t of [trusting, plain]) await createConsoleUser(t, { email: "owner@example.test" });
    await createConsoleUser(plain, { email: "plain@example.test" });
  });
  afterAll(async () => {
    await trusting?.close();
    await plain?.close();
  });

  it("counts a trusted proxy's clients apart, by the address it names", async () => {
    expect((await signInVia(trusting, from("198.51.100.7"), "owner@example.test", wrong)).status).toBe(401);
    expect((await signInVia(trusting, from("198.51.100.7"), "owner@example.test", PASSWORD)).status).toBe(
      429,
    );
    // The owner, behind the same proxy from another address, is not held back by the guesser.
    expect((await signInVia(trusting, from("203.0.113.9"), "owner@example.test", PASSWORD)).status).toBe(201);
  });

  it("counts an IPv6 client by its /64, which one subscriber usually holds whole", async () => {
    const email = "owner@example.test";
    expect((await signInVia(trusting, from("2001:db8:1:1::1"), email, wrong)).status).toBe(401);
    expect((await signInVia(trusting, from("2001:db8:1:1::2"), email, wrong)).status).toBe(429);
    expect((await signInVia(trusting, from("2001:db8:1:1:ffff::9"), email, wrong)).status).toBe(429);
    expect((await signInVia(trusting, from("2001:db8:1:2::1"), email, PASSWORD)).status).toBe(201);
  });

  it("takes the scheme a trusted proxy names, in any case: the session cookie is the secure one behind TLS", async () => {
    // `HTTPS` was taken for plain HTTP (QA of 6 December, session 47): schemes are case-insensitive.
    for (const [address, scheme] of [
      ["192.0.2.44", "https"],
      ["192.0.2.46", "HTTPS"],
    ]) {
      const response = await signInVia(
        trusting,
        { ...from(address as string), "x-forwarded-proto": scheme as string },
        "owner@example.test",
        PASSWORD,
      );
      expect(response.status).toBe(201);
      const cookie = response.headers.getSetCookie().find((value) => value.includes("cumulo_session="));
      expect(cookie, scheme).toMatch(/^__Host-cumulo_session=.*; Secure/);
    }
  });

  it("ignores X-Forwarded-* from anyone when no proxy is trusted", async () => {
    expect((await signInVia(plain, from("198.51.100.7"), "owner@example.test", wrong)).status).toBe(401);
    // A made-up address is no new budget: both attempts came from the same connection's address.
    expect((await signInVia(plain, from("203.0.113.9"), "owner@example.test", PASSWORD)).status).toBe(429);
    // Nor does a made-up scheme make the cookie one for HTTPS, which the browser would then drop.
    const response = await signInVia(
      plain,
      { ...from("192.0.2.45"), "x-forwarded-proto": "https" },
      "plain@example.test",
      PASSWORD,
    );
    expect(response.status).toBe(201);
    const cookie = response.headers.getSetCookie().find((value) => value.includes("cumulo_session="));
    expect(cookie).toMatch(/^cumulo_session=/);
    expect(cookie).not.toMatch(/; Secure/i);
  });
});
