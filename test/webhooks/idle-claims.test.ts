import { setTimeout as pause } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";
import {
  attemptsOf,
  createEndpoint,
  createLibrary,
  emitVideoEvent,
  organizationOf,
  type Receiver,
  startReceiver,
} from "./helpers.ts";

/**
 * Once a claim has found nothing due for any endpoint, finishing attempts do not ask the store again:
 * the next claim waits for new work to be announced. A lone notification costs the claim that takes
 * it and one that finds the queue empty, and the next notification is still sent at once. With the
 * fallback poll ten minutes away, every notification received here was started by the wake-up its
 * commit gave (CONTRACT: the first attempt starts within 1 second on an idle server).
 */
describe("webhook claims while the queue is empty", () => {
  let t: TestApp;
  let receiver: Receiver;

  beforeAll(async () => {
    // No poll during the test: every claim counted comes from a notification or a finished attempt.
    t = await startTestApp({ CUMULO_WEBHOOK_ALLOW_PRIVATE: "true", CUMULO_WEBHOOK_POLL_MS: "600000" });
    receiver = await startReceiver();
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    await receiver.close();
    await t.close();
  });

  it("claims twice per lone notification and nothing more until the next one", async () => {
    const organizationId = await organizationOf(t);
    const libraryId = await createLibrary(t.cumulo.services, organizationId);
    const endpoint = await createEndpoint(t, libraryId, { url: `${receiver.url}/hook`, events: ["created"] });
    // The claim made at start was asked for before this: only later claims are counted.
    const claim = vi.spyOn(t.cumulo.services.webhookDeliveries, "claim");

    for (let notification = 1; notification <= 3; notification++) {
      await emitVideoEvent(t.cumulo.store, t.cumulo.services.webhooks, {
        organizationId,
        libraryId,
        event: "created",
      });
      await receiver.waitFor(notification);
      await waitUntil(
        async () => ((await attemptsOf(t, endpoint.id)).open === 0 ? true : undefined),
        10_000,
        "the attempt recorded",
      );
      // Time for a claim that finishing the attempt would start (the one that finds nothing is asked
      // for when the receiver answers, before the outcome is recorded).
      await pause(100);
      expect(claim).toHaveBeenCalledTimes(2 * notification);
      const outcomes = await Promise.all(claim.mock.results.map((result) => result.value));
      expect(outcomes.map((claimed) => claimed.length)).toEqual(
        Array.from({ length: notification }, () => [1, 0]).flat(),
      );
    }
  });
});
