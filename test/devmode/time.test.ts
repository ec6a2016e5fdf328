import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LATEST_CLOCK_INSTANT, laterBy } from "../../src/clock.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createConsoleUser, signIn, withSession } from "../support/console.ts";
import {
  createEndpoint,
  createLibrary,
  deliveriesWhen,
  emitVideoEvent,
  organizationOf,
  type Receiver,
  startReceiver,
  webhooksPath,
} from "../webhooks/helpers.ts";

const HOUR_MS = 3_600_000;
const LAST = "9998-12-31T23:59:59.999Z";
/** A timestamp with a four-digit year, as the stores and the API's answers hold them. */
const FOUR_DIGIT_YEAR = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}(Z|\+00:00)$/;

describe("moving the clock", () => {
  let t: TestApp;
  let receiver: Receiver | undefined;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_DEV_MODE: "true", CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" });
  });
  afterEach(async () => {
    await t.request("POST", "/_cumulo/time", { json: { real: true } });
    await receiver?.close();
  });
  afterAll(() => t.close());

  it("runs a webhook retry that falls due at once", async () => {
    let calls = 0;
    receiver = await startReceiver((_request, res) => {
      calls++;
      res.statusCode = calls === 1 ? 500 : 200;
      res.end();
    });
    const organizationId = await organizationOf(t);
    const libraryId = await createLibrary(t.cumulo.services, organizationId);
    const endpoint = await createEndpoint(t, libraryId, {
      url: `${receiver.url}/in`,
      // The retry is due an hour after the failure: only a moved clock brings it within the test.
      retry_policy: { max_attempts: 3, initial_delay_s: 3600, multiplier: 1, max_delay_s: 3600 },
    });
    await emitVideoEvent(t.cumulo.store, t.cumulo.services.webhooks, {
      organizationId,
      libraryId,
      event: "created",
    });
    await receiver.waitFor(1);
    // The retry is planned from the clock when the answer is recorded: move it only after that.
    await deliveriesWhen(t, libraryId, endpoint.id, (rows) => rows.some((row) => row.success === false));
    const moved = await t.request("POST", "/_cumulo/time", { json: { advance_ms: 2 * HOUR_MS } });
    expect(moved.status).toBe(200);
    const received = await receiver.waitFor(2);
    expect(received).toHaveLength(2);
  });

  it("sets the clock to an instant, which the server's own clock then reads", async () => {
    const later = new Date(Date.now() + 48 * HOUR_MS).toISOString();
    const moved = await t.request("POST", "/_cumulo/time", { json: { to: later } });
    expect(moved.body.offset_ms).toBeGreaterThan(47 * HOUR_MS);
    expect(Date.parse(moved.body.now)).toBeGreaterThanOrEqual(Date.parse(later));
    const stamped = await t.request("POST", "/v1/media/libraries", { json: { name: "Later" } });
    expect(Date.parse(stamped.body.data.created_at)).toBeGreaterThanOrEqual(Date.parse(later));
  });

  // QA of 5 December (session 43): at the clock's last instant, what is reckoned ahead of it (a
  // webhook attempt's lease and retry, a console session) passed the year 9999. On SQLite the lease
  // read as run out and one attempt went out hundreds of times a second; on PostgreSQL every claim
  // failed; a sign-in answered 500.
  it("stops a year short of the year 10000, where leases, retries and sessions still fit", async () => {
    const past = await t.request("POST", "/_cumulo/time", { json: { to: "9999-01-01T00:00:00.000Z" } });
    expect(past.status).toBe(400);
    expect(past.body.errors).toEqual([expect.objectContaining({ field: "to", code: "validation_max" })]);
    const moved = await t.request("POST", "/_cumulo/time", { json: { to: LAST } });
    expect([moved.status, moved.body.now]).toEqual([200, LAST]);

    receiver = await startReceiver((_request, res) => {
      res.statusCode = 500;
      res.end();
    });
    const libraryId = await createLibrary(t.cumulo.services, await organizationOf(t));
    const endpoint = await createEndpoint(t, libraryId, { url: `${receiver.url}/in` });
    const endpointPath = `${webhooksPath(libraryId)}/${endpoint.id}`;
    expect((await t.request("POST", `${endpointPath}/test`)).status).toBe(202);
    const [attempt] = await deliveriesWhen(
      t,
      libraryId,
      endpoint.id,
      (rows) => rows.length === 1 && typeof rows[0].next_retry_at === "string",
    );
    expect(attempt.next_retry_at).toMatch(FOUR_DIGIT_YEAR);
    expect(attempt.next_retry_at > attempt.created_at).toBe(true);
    // Its retry is due 5 s later, on a clock that stays where it is: nothing more goes out.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(receiver.received).toHaveLength(1);
    expect((await t.request("GET", `${endpointPath}/events`)).body.data).toHaveLength(1);

    const user = await createConsoleUser(t, { email: "late@example.com" });
    const signedIn = await signIn(t, user.email);
    expect((await t.request("GET", "/v1/console/session", withSession(signedIn))).status).toBe(200);
    expect((await t.request("POST", "/_cumulo/time", { json: { real: true } })).body.offset_ms).toBe(0);
  }, 30_000);

  it("reckons a configured duration of up to 100 years from it no later than the last four-digit year", () => {
    const hundredYears = 36_500 * 86_400_000;
    expect(laterBy(new Date(LATEST_CLOCK_INSTANT), hundredYears).toISOString()).toBe(
      "9999-12-31T23:59:59.999Z",
    );
    expect(laterBy(new Date("2026-12-05T00:00:00.000Z"), 86_400_000).toISOString()).toBe(
      "2026-12-06T00:00:00.000Z",
    );
  });

  it("records a key's use again once the clock is put back (QA of 5 December, session 43)", async () => {
    // The listing's own request uses the admin key first.
    const lastUsed = async (): Promise<string> => {
      const keys = await t.request("GET", "/v1/organization/api-keys");
      return keys.body.data.find((key: { prefix: string }) => t.adminKey.startsWith(key.prefix)).last_used_at;
    };
    await t.request("POST", "/_cumulo/time", { json: { advance_ms: 24 * HOUR_MS } });
    expect(Date.parse(await lastUsed())).toBeGreaterThan(Date.now() + 23 * HOUR_MS);
    await t.request("POST", "/_cumulo/time", { json: { real: true } });
    expect(Date.parse(await lastUsed())).toBeLessThan(Date.now() + HOUR_MS);
  });

  it("lets a console session used while the clock was ahead idle out once it is put back (QA of 5 December, session 43)", async () => {
    const user = await createConsoleUser(t, { email: "idle@example.com" });
    const signedIn = await signIn(t, user.email);
    const session = () => t.request("GET", "/v1/console/session", withSession(signedIn));
    await t.request("POST", "/_cumulo/time", { json: { advance_ms: HOUR_MS } });
    expect((await session()).status).toBe(200);
    await t.request("POST", "/_cumulo/time", { json: { real: true } });
    expect((await session()).status).toBe(200);
    // Idle for 8 hours from its last use at real time, not from the hour ahead.
    await t.request("POST", "/_cumulo/time", { json: { advance_ms: 8 * HOUR_MS + 120_000 } });
    expect((await session()).status).toBe(401);
  });
});
