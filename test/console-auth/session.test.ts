import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OffsetClock } from "../../src/clock.ts";
import type { Housekeeper } from "../../src/ops/housekeeping.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createConsoleUser, PASSWORD, sessionCookieOf, signIn, withSession } from "../support/console.ts";

const INVALID_CREDENTIALS = {
  success: false,
  error: "unauthorized",
  code: "invalid_credentials",
  message: "Wrong email or password",
};

describe("console sign-in and sessions", () => {
  let t: TestApp;
  const clock = new OffsetClock();
  beforeAll(async () => {
    t = await startTestApp({}, { clock });
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
    // Plain HTTP without an https public URL: not Secure (a browser would drop it on http://).
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

  // QA of 6 December (session 47): one visible address typed precomposed or decomposed made two
  // accounts, and the decomposed one could not sign in with the usual spelling.
  it("takes an email's letters as they show (Unicode NFC), and refuses control characters in it", async () => {
    const decomposed = "a\u0308nne@example.test";
    const user = await createConsoleUser(t, { email: decomposed });
    expect(user.email).toBe("\u00e4nne@example.test");
    const signedIn = await t.request("POST", "/v1/console/session", {
      anonymous: true,
      json: { email: "\u00c4nne@example.test", password: PASSWORD },
    });
    expect(signedIn.status).toBe(201);
    const again = await t.cumulo.services.console.createUser({
      organizationId: user.organization_id,
      email: "\u00e4nne@example.test",
      readOnly: false,
    });
    expect(again.outcome).toBe("email_taken");
    const control = await t.cumulo.services.console.createUser({
      organizationId: user.organization_id,
      email: "ctl\u0001@example.test",
      readOnly: false,
    });
    expect(control).toMatchObject({
      outcome: "invalid",
      errors: [{ field: "email", code: "validation_format" }],
    });
  });

  it("stores only a hash of the cookie", async () => {
    const session = await signIn(t, "ada@example.test");
    const value = session.cookie.split("=")[1] ?? "";
    const rows = await t.cumulo.store.db.selectFrom("console_sessions").selectAll().execute();
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row.token_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(row.token_hash).not.toContain(value);
    }
    const users = await t.cumulo.store.db
      .selectFrom("users")
      .select("password_hash")
      .where("email", "=", "ada@example.test")
      .execute();
    expect(users[0]?.password_hash).toMatch(/^scrypt\$32768\$8\$1\$[\w-]{22}\$[\w-]{43}$/);
  });

  it("answers the same 401 to a wrong password and to an unknown email", async () => {
    const wrong = await t.request("POST", "/v1/console/session", {
      anonymous: true,
      json: { email: "ada@example.test", password: "not the password" },
    });
    const unknown = await t.request("POST", "/v1/console/session", {
      anonymous: true,
      json: { email: "nobody@example.test", password: PASSWORD },
    });
    for (const response of [wrong, unknown]) {
      expect(response.status).toBe(401);
      expect(response.body).toEqual(INVALID_CREDENTIALS);
      expect(sessionCookieOf(response.headers)).toBeUndefined();
    }
  });

  it("refuses malformed sign-in bodies with field errors", async () => {
    const response = await t.request("POST", "/v1/console/session", { anonymous: true, json: { email: 5 } });
    expect(response.status).toBe(400);
    expect(response.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(["email", "password"]);
  });

  it("takes JSON only, so no cross-site form can sign anyone in", async () => {
    for (const [type, body] of [
      [
        "application/x-www-form-urlencoded",
        `email=ada%40example.test&password=${encodeURIComponent(PASSWORD)}`,
      ],
      ["text/plain", JSON.stringify({ email: "ada@example.test", password: PASSWORD })],
    ]) {
      const response = await t.request("POST", "/v1/console/session", {
        anonymous: true,
        headers: { "content-type": type ?? "" },
        body,
      });
      expect(response.status).toBe(415);
      expect(sessionCookieOf(response.headers)).toBeUndefined();
    }
  });

  it("answers 401 without a session and with a cookie naming none", async () => {
    const none = await t.request("GET", "/v1/console/session", { anonymous: true });
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ success: false, error: "unauthorized", code: "not_signed_in" });
    const forged = await t.request("GET", "/v1/console/session", {
      anonymous: true,
      headers: { cookie: "cumulo_session=forged" },
    });
    expect(forged.status).toBe(401);
    expect(forged.body).toMatchObject({ success: false, error: "unauthorized", code: "session_expired" });
    // On an API route a dead cookie is a 401 too, never the key's answer.
    const media = await t.request("GET", "/v1/media/libraries", {
      anonymous: true,
      headers: { cookie: "cumulo_session=forged" },
    });
    expect(media.status).toBe(401);
  });

  it("signs out only with the CSRF token, ending the session and clearing the cookie", async () => {
    const session = await signIn(t, "ada@example.test");
    const refused = await t.request("DELETE", "/v1/console/session", withSession(session, false));
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ success: false, error: "forbidden", code: "csrf_token_invalid" });
    expect((await t.request("GET", "/v1/console/session", withSession(session))).status).toBe(200);

    const out = await t.request("DELETE", "/v1/console/session", withSession(session));
    expect(out.status).toBe(204);
    expect(out.headers.getSetCookie()[0]).toMatch(
      /^cumulo_session=; Max-Age=0; Path=\/; Expires=Thu, 01 Jan 1970/,
    );
    expect((await t.request("GET", "/v1/console/session", withSession(session))).status).toBe(401);
    expect((await t.request("GET", "/v1/media/libraries", withSession(session))).status).toBe(401);
    // Signing out again (a stale tab) just clears the cookie.
    expect((await t.request("DELETE", "/v1/console/session", withSession(session))).status).toBe(204);
  });

  it("ends a session after 8 hours idle, and after 7 days however active", async () => {
    clock.offsetMs = 0;
    const idle = await signIn(t, "ada@example.test");
    const active = await signIn(t, "ada@example.test");
    try {
      clock.offsetMs = 7 * 60 * 60 * 1000;
      expect((await t.request("GET", "/v1/console/session", withSession(active))).status).toBe(200);
      clock.offsetMs = 8 * 60 * 60 * 1000 + 1000;
      expect((await t.request("GET", "/v1/console/session", withSession(idle))).status).toBe(401);
      // Used an hour ago: still live.
      expect((await t.request("GET", "/v1/console/session", withSession(active))).status).toBe(200);
      for (let hours = 14; hours < 7 * 24; hours += 6) {
        clock.offsetMs = hours * 60 * 60 * 1000;
        expect((await t.request("GET", "/v1/media/libraries", withSession(active))).status).toBe(200);
      }
      clock.offsetMs = 7 * 24 * 60 * 60 * 1000 + 1000;
      expect((await t.request("GET", "/v1/media/libraries", withSession(active))).status).toBe(401);
    } finally {
      clock.offsetMs = 0;
    }
  });
});

describe("console cookie over https", () => {
  it("is Secure and __Host- prefixed when the public URL is https (TLS ends at a proxy)", async () => {
    const t = await startTestApp({ CUMULO_PUBLIC_URL: "https://cumulo.example.invalid" });
    try {
      for (const email of ["secure@example.test", "sibling@example.test"])
        await createConsoleUser(t, { email });
      const session = await signIn(t, "secure@example.test");
      expect(session.setCookie).toMatch(
        /^__Host-cumulo_session=[\w-]{43}; Max-Age=604800; Path=\/; HttpOnly; Secure; SameSite=Strict$/,
      );
      // A plain-named copy is what another host (a sibling subdomain) can plant: it is not read.
      const sibling = await signIn(t, "sibling@example.test");
      const planted = sibling.cookie.replace(/^__Host-/, "");
      const current = await t.request("GET", "/v1/console/session", {
        anonymous: true,
        headers: { cookie: `${planted}; ${session.cookie}` },
      });
      expect(current.status).toBe(200);
      expect(current.body.data).toEqual(session.session);
      const plainOnly = await t.request("GET", "/v1/console/session", {
        anonymous: true,
        headers: { cookie: planted },
      });
      expect(plainOnly.status).toBe(401);
      expect(plainOnly.body).toMatchObject({ code: "not_signed_in" });
      const out = await t.request("DELETE", "/v1/console/session", withSession(session));
      expect(out.status).toBe(204);
      expect(out.headers.getSetCookie()).toEqual([
        expect.stringMatching(
          /^__Host-cumulo_session=; Max-Age=0; Path=\/; Expires=.*; HttpOnly; Secure; SameSite=Strict$/,
        ),
      ]);
    } finally {
      await t.close();
    }
  });
});

/**
 * A request through node:http, which lets a test choose what fetch does not: the client's loopback
 * address (Linux routes all of 127/8 to loopback) and the Host header.
 */
function rawRequest(
  t: TestApp,
  method: string,
  path: string,
  options: { localAddress?: string; headers?: Record<string, string>; json?: unknown } = {},
) {
  return new Promise<{ status: number; headers: IncomingHttpHeaders; body: any }>((resolve, reject) => {
    const request = httpRequest(
      new URL(path, t.baseUrl),
      {
        method,
        localAddress: options.localAddress,
        headers: {
          ...(options.json === undefined ? {} : { "content-type": "application/json" }),
          ...options.headers,
        },
      },
      (response) => {
        let text = "";
        response.on("data", (chunk) => {
          text += chunk;
        });
        response.on("end", () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: text === "" ? undefined : JSON.parse(text),
          }),
        );
      },
    );
    request.on("error", reject);
    request.end(options.json === undefined ? undefined : JSON.stringify(options.json));
  });
}

/** A sign-in attempt sent from a given loopback address. */
async function signInFrom(t: TestApp, localAddress: string, email: string, password = "a wrong password") {
  const response = await rawRequest(t, "POST", "/v1/console/session", {
    localAddress,
    json: { email, password },
  });
  return {
    status: response.status,
    retryAfter: response.headers["retry-after"] as string | undefined,
    limit: response.headers["ratelimit-limit"] as string | undefined,
    remaining: response.headers["ratelimit-remaining"] as string | undefined,
    body: response.body,
  };
}

describe("sign-in rate limit", () => {
  let t: TestApp;
  // One attempt per (address, email) pair; ten per address and ten per email.
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_SIGN_IN_RATE_LIMIT: "1/15m" });
    for (const email of ["owner@example.test", "sprayed@example.test"]) await createConsoleUser(t, { email });
  });
  afterAll(() => t.close());

  it("limits one address on one email, without locking the email's owner out", async () => {
    expect((await signInFrom(t, "127.0.0.2", "owner@example.test")).status).toBe(401);
    const limited = await signInFrom(t, "127.0.0.2", "OWNER@example.test", PASSWORD);
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({
      success: false,
      error: "rate_limited",
      message: "Too many requests",
    });
    expect(Number(limited.retryAfter)).toBeGreaterThan(0);
    expect(limited.limit).toBe("1");
    expect(limited.remaining).toBe("0");
    // The owner, from their own address, signs in: the stranger spent only their pair's budget.
    expect((await signInFrom(t, "127.0.0.3", "owner@example.test", PASSWORD)).status).toBe(201);
    // And the stranger's address may still try another email.
    expect((await signInFrom(t, "127.0.0.2", "other@example.test")).status).toBe(401);
  });

  it("limits one address on many emails to ten times the pair's budget", async () => {
    for (let n = 0; n < 10; n++) {
      expect((await signInFrom(t, "127.0.0.9", `nobody${n}@example.test`)).status).toBe(401);
    }
    const limited = await signInFrom(t, "127.0.0.9", "nobody10@example.test");
    expect(limited.status).toBe(429);
    expect(limited.body.error).toBe("rate_limited");
    expect(Number(limited.retryAfter)).toBeGreaterThan(0);
    expect(limited.limit).toBe("10");
    // Another address is not held back by this one.
    expect((await signInFrom(t, "127.0.0.10", "nobody11@example.test")).status).toBe(401);
  });

  it("limits many addresses on one email to ten times the pair's budget", async () => {
    for (let n = 0; n < 10; n++) {
      expect((await signInFrom(t, `127.0.1.${n + 1}`, "sprayed@example.test")).status).toBe(401);
    }
    const limited = await signInFrom(t, "127.0.1.11", "sprayed@example.test");
    expect(limited.status).toBe(429);
    expect(limited.limit).toBe("10");
    expect(Number(limited.retryAfter)).toBeGreaterThan(0);
    // The circuit breaker's price: this many sources hold the owner back too, until the window ends.
    expect((await signInFrom(t, "127.0.1.12", "sprayed@example.test", PASSWORD)).status).toBe(429);
  });
});

describe.runIf(process.env.TEST_REDIS_URL)("sign-in rate limit shared through Redis", () => {
  it("counts a pair's attempts on two nodes against one budget", async () => {
    const env = { CUMULO_SIGN_IN_RATE_LIMIT: "1/15m", REDIS_URL: process.env.TEST_REDIS_URL ?? "" };
    const first = await startTestApp(env);
    // A second node on the same database and Redis, as behind a load balancer.
    const second = await startTestApp(env, { store: first.store });
    try {
      await createConsoleUser(first, { email: "shared@example.test" });
      expect((await signInFrom(first, "127.0.0.2", "shared@example.test")).status).toBe(401);
      expect((await signInFrom(second, "127.0.0.2", "shared@example.test", PASSWORD)).status).toBe(429);
      expect((await signInFrom(second, "127.0.0.3", "shared@example.test", PASSWORD)).status).toBe(201);
    } finally {
      await second.close();
      await first.close();
    }
  }, 60_000);
});

describe("a planted second session cookie", () => {
  // A page on a domain or port sharing the console's cookies can set a cookie of the same name with
  // another path or domain; the browser then sends both, in an order the page can choose.
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
    for (const email of ["owner@example.test", "planter@example.test"]) await createConsoleUser(t, { email });
  });
  afterAll(() => t.close());

  const withCookies = (cookies: string[], csrf?: string) => ({
    anonymous: true,
    headers: { cookie: cookies.join("; "), ...(csrf ? { "x-csrf-token": csrf } : {}) },
  });

  it("is ignored when it names no live session, whichever the browser sends first", async () => {
    const real = await signIn(t, "owner@example.test");
    const ended = await signIn(t, "owner@example.test");
    expect((await t.request("DELETE", "/v1/console/session", withSession(ended))).status).toBe(204);
    const never = `cumulo_session=${"A".repeat(43)}`;
    for (const planted of ["cumulo_session=planted", ended.cookie, never]) {
      for (const cookies of [
        [planted, real.cookie],
        [real.cookie, planted],
      ]) {
        const current = await t.request("GET", "/v1/console/session", withCookies(cookies));
        expect(current.status, cookies.join("; ")).toBe(200);
        expect(current.body.data).toEqual(real.session);
        const created = await t.request("POST", "/v1/media/libraries", {
          ...withCookies(cookies, real.csrf),
          json: { name: "Made past a planted cookie" },
        });
        expect(created.status).toBe(201);
      }
    }
  });

  it("of another person's live session runs as neither on reads, ends both, and is harmless after signing in again", async () => {
    const planted = await signIn(t, "planter@example.test");
    const real = await signIn(t, "owner@example.test");
    const cookies = [planted.cookie, real.cookie];
    // A write names its session by its CSRF token, which only the owner's page knows.
    const created = await t.request("POST", "/v1/media/libraries", {
      ...withCookies(cookies, real.csrf),
      json: { name: "The owner's" },
    });
    expect(created.status).toBe(201);
    expect(created.body.data.created_by).toBe(real.session.user.uuid);
    const read = await t.request("GET", "/v1/media/libraries", withCookies(cookies));
    expect(read.status).toBe(401);
    expect(read.body).toMatchObject({ code: "session_expired" });
    expect((await t.request("GET", "/v1/console/session", withSession(real))).status).toBe(401);
    expect((await t.request("GET", "/v1/console/session", withSession(planted))).status).toBe(401);
    // The planted cookie now names an ended session: signing in again is enough.
    const again = await signIn(t, "owner@example.test");
    const current = await t.request(
      "GET",
      "/v1/console/session",
      withCookies([planted.cookie, again.cookie]),
    );
    expect(current.status).toBe(200);
    expect(current.body.data).toEqual(again.session);
  });

  it("is ended and expired by sign-out, at every path and domain that sent it here", async () => {
    const planted = await signIn(t, "planter@example.test");
    const real = await signIn(t, "owner@example.test");
    const out = await rawRequest(t, "DELETE", "/v1/console/session", {
      headers: {
        host: "console.cumulo.test",
        cookie: `${planted.cookie}; ${real.cookie}`,
        "x-csrf-token": real.csrf,
      },
    });
    expect(out.status).toBe(204);
    const cleared = (out.headers["set-cookie"] ?? []).map((header) => header.replace(/; Expires=.*$/, ""));
    expect(cleared[0]).toBe("cumulo_session=; Max-Age=0; Path=/");
    for (const path of ["/", "/v1", "/v1/", "/v1/console", "/v1/console/", "/v1/console/session"]) {
      for (const domain of ["console.cumulo.test", "cumulo.test"]) {
        expect(cleared).toContain(`cumulo_session=; Max-Age=0; Domain=${domain}; Path=${path}`);
      }
      if (path !== "/") expect(cleared).toContain(`cumulo_session=; Max-Age=0; Path=${path}`);
    }
    expect((await t.request("GET", "/v1/console/session", withSession(real))).status).toBe(401);
    expect((await t.request("GET", "/v1/console/session", withSession(planted))).status).toBe(401);
  });
});

describe("sessions across API nodes", () => {
  it("are accepted and ended by any node on the same store", async () => {
    const first = await startTestApp();
    // A second node on the same database, as behind a load balancer.
    const second = await startTestApp({}, { store: first.store });
    try {
      await createConsoleUser(first, { email: "nodes@example.test" });
      const session = await signIn(first, "nodes@example.test");
      expect((await second.request("GET", "/v1/console/session", withSession(session))).status).toBe(200);
      const created = await second.request("POST", "/v1/media/libraries", {
        ...withSession(session),
        json: { name: "Made on node two" },
      });
      expect(created.status).toBe(201);
      expect((await second.request("DELETE", "/v1/console/session", withSession(session))).status).toBe(204);
      expect((await first.request("GET", "/v1/media/libraries", withSession(session))).status).toBe(401);
    } finally {
      await second.close();
      await first.close();
    }
  });
});

describe("housekeeping of sessions", () => {
  it("deletes ended sessions' rows and keeps live ones", async () => {
    const clock = new OffsetClock();
    // A worker whose hourly round is far off: the test runs the round itself.
    const t = await startTestApp({ CUMULO_ROLES: "api,worker" }, { clock });
    try {
      const housekeeper = t.cumulo.services.workers.find(
        (worker) => worker.name === "housekeeping",
      ) as Housekeeper;
      await createConsoleUser(t, { email: "tidy@example.test" });
      const ended = await signIn(t, "tidy@example.test");
      clock.offsetMs = 5 * 60 * 60 * 1000;
      const live = await signIn(t, "tidy@example.test");
      clock.offsetMs = 9 * 60 * 60 * 1000;
      await housekeeper.runOnce();
      const rows = await t.cumulo.store.db.selectFrom("console_sessions").select("id").execute();
      expect(rows).toHaveLength(1);
      expect((await t.request("GET", "/v1/console/session", withSession(live))).status).toBe(200);
      expect((await t.request("GET", "/v1/console/session", withSession(ended))).status).toBe(401);
    } finally {
      await t.close();
    }
  });
});
