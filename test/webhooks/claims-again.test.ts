import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createMigratedTestStore, type TestStore } from "../support/store.ts";
import {
  createEndpoint,
  createLibrary,
  emitVideoEvent,
  organizationOf,
  type Receiver,
  startReceiver,
} from "./helpers.ts";

// More than the 128 oldest attempts a claim of 32 reads first, so they hide what is queued after them.
const HANGING_BACKLOG = 200;
// More than one endpoint may hold (twice its 8 in flight), so the first endpoint behind is refused too.
const FAST_ATTEMPTS = 40;

/**
 * A claim for anything due that took some attempts claims again at once: work may wait behind the
 * oldest attempts, and nothing else would ask for it before the poll (QA of session 53, Finding D:
 * a burst behind one endpoint's backlog came at the poll's pace).
 */
describe("webhook claims behind an endpoint that holds its attempts open", () => {
  let store: TestStore;
  let api: TestApp;
  let worker: TestApp | undefined;
  let hanging: Receiver;
  let fast: Receiver;
  const held: ServerResponse[] = [];

  beforeAll(async () => {
    store = await createMigratedTestStore();
    api = await startTestApp({ CUMULO_ROLES: "api", CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" }, { store });
    hanging = await startReceiver((_request, res) => {
      held.push(res);
    });
    fast = await startReceiver();
  });
  afterAll(async () => {
    for (const res of held) res.end("late");
    await worker?.close();
    await Promise.all([hanging.close(), fast.close()]);
    await api.close();
    await store.drop();
  });

  it("delivers what waits behind a hanging endpoint's backlog without waiting for the poll", async () => {
    const organizationId = await organizationOf(api);
    const libraryId = await createLibrary(api.cumulo.services, organizationId);
    await createEndpoint(api, libraryId, { url: `${hanging.url}/hanging`, events: ["created"] });
    await createEndpoint(api, libraryId, { url: `${fast.url}/first`, events: ["ready"] });
    await createEndpoint(api, libraryId, { url: `${fast.url}/second`, events: ["failed"] });
    const notify = (event: "created" | "ready" | "failed", count: number) =>
      (async () => {
        for (let i = 0; i < count; i++) {
          await emitVideoEvent(api.cumulo.store, api.cumulo.services.webhooks, {
            organizationId,
            libraryId,
            event,
          });
        }
      })();
    // Queued before any worker runs, oldest first: the hanging endpoint's, then the two fast ones'.
    await notify("created", HANGING_BACKLOG);
    await notify("ready", FAST_ATTEMPTS);
    await notify("failed", 1);

    // The poll is a minute away and no notification arrives after the start: only claims the worker
    // makes by itself can find the fast endpoints' attempts. Its first claim takes the hanging
    // endpoint's round and finds nothing else among the oldest attempts.
    worker = await startTestApp(
      {
        CUMULO_ROLES: "worker",
        CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
        CUMULO_WEBHOOK_POLL_MS: "60000",
        CUMULO_WEBHOOK_TIMEOUT_MS: "120000",
      },
      { store },
    );
    await fast.waitFor(FAST_ATTEMPTS + 1, 20_000);
  }, 90_000);
});
