import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";
import {
  createEndpoint,
  createLibrary,
  emitVideoEvent,
  organizationOf,
  type Receiver,
  startReceiver,
} from "./helpers.ts";

const PER_ENDPOINT = 8;
// More than one round of attempts to the endpoint, less than the two rounds it may hold.
const EVENTS = 12;

/**
 * The dispatcher claims an endpoint's next round of attempts while the current one is being sent
 * (one claim serves many attempts), sends no more than its per-endpoint limit at once, and gives the
 * attempts it claimed but never sent back to the queue when it stops.
 */
describe("webhook attempts claimed ahead", () => {
  let t: TestApp;
  let receiver: Receiver;
  const held: ServerResponse[] = [];

  beforeAll(async () => {
    t = await startTestApp({ CUMULO_WEBHOOK_ALLOW_PRIVATE: "true", CUMULO_WEBHOOK_TIMEOUT_MS: "120000" });
    receiver = await startReceiver((_request, res) => {
      held.push(res);
    });
  });
  afterAll(async () => {
    for (const res of held) res.end("late");
    await receiver.close();
    await t.close();
  });

  const states = async () => {
    const rows = await t.cumulo.store.db
      .selectFrom("webhook_deliveries")
      .select(["state", "locked_until"])
      .execute();
    const count = (state: string) => rows.filter((row) => row.state === state).length;
    return {
      pending: count("pending"),
      sending: count("sending"),
      done: count("done"),
      unlocked: rows.filter((row) => row.state === "pending" && row.locked_until === null).length,
    };
  };

  it("holds the next round claimed, sends one round at a time, and gives the rest back on stop", async () => {
    const organizationId = await organizationOf(t);
    const libraryId = await createLibrary(t.cumulo.services, organizationId);
    await createEndpoint(t, libraryId, { url: `${receiver.url}/held`, events: ["created"] });
    for (let i = 0; i < EVENTS; i++) {
      await emitVideoEvent(t.cumulo.store, t.cumulo.services.webhooks, {
        organizationId,
        libraryId,
        event: "created",
      });
    }

    // One round is being sent and held open by the receiver, and more than that round is claimed.
    // (How many more depends on how the notifications and claims interleave: an endpoint with attempts
    // waiting in hand claims no more until that queue runs dry, which the held round prevents here.)
    await receiver.waitFor(PER_ENDPOINT, 20_000);
    await waitUntil(
      async () => (await states()).sending > PER_ENDPOINT || undefined,
      20_000,
      "the next round claimed ahead",
    );
    expect(receiver.received).toHaveLength(PER_ENDPOINT);

    // Stopping gives the claimed attempts that were not sent back at once, then waits for the round in flight.
    const stopped = t.cumulo.services.webhookDispatcher.stop();
    await waitUntil(
      async () => (await states()).pending === EVENTS - PER_ENDPOINT || undefined,
      20_000,
      "unsent attempts given back",
    );
    for (const res of held) res.end("ok");
    await stopped;
    expect(await states()).toEqual({
      pending: EVENTS - PER_ENDPOINT,
      sending: 0,
      done: PER_ENDPOINT,
      unlocked: EVENTS - PER_ENDPOINT,
    });
    expect(receiver.received).toHaveLength(PER_ENDPOINT);
  }, 60_000);
});
