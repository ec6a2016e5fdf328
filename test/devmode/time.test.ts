import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import {
  createEndpoint,
  createLibrary,
  deliveriesWhen,
  emitVideoEvent,
  organizationOf,
  type Receiver,
  startReceiver,
} from "../webhooks/helpers.ts";

const HOUR_MS = 3_600_000;

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
});
