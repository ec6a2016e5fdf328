import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

// Verified keys are cached only with Redis (src/services.ts): the cache must forget a key a load removed.
describe.runIf(process.env.TEST_REDIS_URL)("caches after a snapshot load (with Redis)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_DEV_MODE: "true", REDIS_URL: process.env.TEST_REDIS_URL ?? "" });
  });
  afterAll(() => t.close());

  it("forgets a verified key that the loaded snapshot does not have", async () => {
    expect((await t.request("PUT", "/_cumulo/state/snapshots/before_key")).status).toBe(200);
    const other = await t.createOrganization("Cached");
    // Verified once: now in the auth cache (kept up to 2 s unless dropped).
    expect((await t.request("GET", "/v1/media/libraries", { key: other.key })).status).toBe(200);
    expect((await t.request("GET", "/v1/media/libraries", { key: other.key })).status).toBe(200);
    expect((await t.request("POST", "/_cumulo/state/snapshots/before_key/load")).status).toBe(200);
    expect((await t.request("GET", "/v1/media/libraries", { key: other.key })).status).toBe(401);
  });
});
