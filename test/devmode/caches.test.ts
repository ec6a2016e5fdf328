import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createEndpoint, type Receiver, startReceiver } from "../webhooks/helpers.ts";

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

describe("webhook attempts claimed before a snapshot load", () => {
  let t: TestApp;
  let receiver: Receiver;
  beforeAll(async () => {
    // Each answer is held a while, so the endpoint's 8 sending slots stay full and the next attempts
    // wait in the dispatcher's hand.
    receiver = await startReceiver((_request, res) => setTimeout(() => res.end("ok"), 800));
    t = await startTestApp({ CUMULO_DEV_MODE: "true", CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" });
  });
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  it("are not sent after the load: a receiver shared by the tests hears nothing of the state before", async () => {
    const libraryId = (await createLibrary(t, { name: "Before" })).id;
    expect((await t.request("PUT", "/_cumulo/state/snapshots/no_endpoint")).status).toBe(200);
    await createEndpoint(t, libraryId, { url: receiver.url });
    const created = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        t.request("POST", `/v1/media/libraries/${libraryId}/videos`, { json: { title: `v${i}` } }),
      ),
    );
    for (const video of created) expect(video.status).toBe(201);
    // Eight attempts are being answered; those claimed beside them wait in the dispatcher's hand.
    await receiver.waitFor(8);
    const loaded = await t.request("POST", "/_cumulo/state/snapshots/no_endpoint/load");
    expect(loaded.status, loaded.text).toBe(200);
    const heardBefore = receiver.received.length;
    // Past the held answers: any attempt still in hand would have been sent by now.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(receiver.received.length).toBe(heardBefore);
  });
});
