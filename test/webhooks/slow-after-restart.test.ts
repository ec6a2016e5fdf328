import { existsSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { type Served, serve, stopAll } from "../support/process.ts";
import { createMigratedTestStore, type TestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import {
  createEndpoint,
  createLibrary,
  emitVideoEvent,
  organizationOf,
  type Receiver,
  startReceiver,
} from "./helpers.ts";

// At an open-file limit of 600 a process has 256 slots for the others' attempts and 44 for slow
// ones; at 4,096, 768 for slow ones (src/webhooks/connection-budget.ts).
const FEW_OPEN_FILES = 600;
const ENOUGH_OPEN_FILES = 4096;
const HANGING_ENDPOINTS = 400;

/** A store, an API node that sends nothing, and worker processes started on demand. */
async function deliveryNodes(endpointsMax: number) {
  const store: TestStore = await createMigratedTestStore();
  const api: TestApp = await startTestApp(
    {
      CUMULO_ROLES: "api",
      CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
      CUMULO_WEBHOOK_ENDPOINTS_MAX: String(endpointsMax),
      CUMULO_RATE_LIMIT: "100000/1m",
    },
    { store },
  );
  const organizationId = await organizationOf(api);
  const libraryId = await createLibrary(api.cumulo.services, organizationId);
  const workers: Served[] = [];
  return {
    addEndpoint: (url: string, event: "created" | "ready") =>
      createEndpoint(api, libraryId, { url, events: [event] }),
    notify: (event: "created" | "ready") =>
      emitVideoEvent(api.cumulo.store, api.cumulo.services.webhooks, { organizationId, libraryId, event }),
    markedSlow: async () =>
      Number(
        (
          await api.cumulo.store.db
            .selectFrom("webhook_slow_endpoints")
            .select((eb) => eb.fn.countAll().as("count"))
            .executeTakeFirstOrThrow()
        ).count,
      ),
    async startWorker(timeoutMs: number, openFiles?: number): Promise<Served> {
      const worker = await serve(
        {
          CUMULO_DATA_DIR: store.dataDir,
          DATABASE_URL: store.databaseUrl,
          CUMULO_ROLES: "worker",
          CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
          CUMULO_WEBHOOK_TIMEOUT_MS: String(timeoutMs),
        },
        ["serve"],
        90_000,
        openFiles ? ["/usr/bin/prlimit", `--nofile=${openFiles}:${openFiles}`] : [],
      );
      workers.push(worker);
      return worker;
    },
    async stopWorker(worker: Served): Promise<void> {
      await stopAll([worker]);
      workers.splice(workers.indexOf(worker), 1);
    },
    /** Stops what is left; attempts still on their way are answered first, as a stop waits for them. */
    async close(answerHeld: () => void): Promise<void> {
      answerHeld();
      await stopAll(workers);
      await api.close();
      await store.drop();
    },
  };
}

/** A receiver that holds every request open until `release`, and answers at once from then on. */
async function holdingReceiver(): Promise<Receiver & { release(): void }> {
  const held: ServerResponse[] = [];
  const receiver = await startReceiver((_request, res) => {
    held.push(res);
  });
  return Object.assign(receiver, {
    release() {
      receiver.respond = (_request, res) => res.end("late");
      for (const res of held.splice(0)) res.end("late");
    },
  });
}

describe.skipIf(!existsSync("/usr/bin/prlimit"))("webhook endpoints judged slow, across a restart", () => {
  // QA of session 54: a restarted process knew no endpoint as slow, so endpoints that hang took every
  // slot again and a fast endpoint waited for their timeout after each restart.
  it("serves a fast endpoint at once after a restart, though more endpoints hang than it has slots", async () => {
    const nodes = await deliveryNodes(HANGING_ENDPOINTS + 1);
    const hanging = await holdingReceiver();
    const fast = await startReceiver();
    try {
      for (let i = 0; i < HANGING_ENDPOINTS; i++)
        await nodes.addEndpoint(`${hanging.url}/hanging/${i}`, "created");
      await nodes.addEndpoint(`${fast.url}/fast`, "ready");

      // A first worker: every hanging endpoint's attempt times out after 1.5 s, and is judged slow.
      await nodes.notify("created");
      const first = await nodes.startWorker(1500);
      await waitUntil(
        async () => ((await nodes.markedSlow()) === HANGING_ENDPOINTS ? true : undefined),
        60_000,
        "every hanging endpoint judged slow",
      );
      await nodes.stopWorker(first);

      // While no worker runs: one more attempt to each hanging endpoint, then the fast endpoint's,
      // newer than all of them.
      await nodes.notify("created");
      await nodes.notify("ready");
      await nodes.startWorker(120_000, FEW_OPEN_FILES);
      // Long before a hanging attempt times out (2 minutes): the restarted worker knew them as slow.
      await fast.waitFor(1, 20_000);
      expect(fast.received[0]?.path).toBe("/fast");
      expect(await nodes.markedSlow()).toBe(HANGING_ENDPOINTS);
    } finally {
      await nodes.close(() => hanging.release());
      await Promise.all([hanging.close(), fast.close()]);
    }
  }, 240_000);

  // QA of session 57: endpoints still marked slow that had recovered were reached only 256 at a time
  // behind the ones still hanging, a timeout each round. Their attempts are now claimed up to the slow
  // slots: 400 hanging and 50 recovered endpoints fit in 768 at once, not in 256.
  it("claims marked endpoints' attempts up to the slow slots, so recovered ones are not held behind hanging ones", async () => {
    const RECOVERED_ENDPOINTS = 50;
    const nodes = await deliveryNodes(HANGING_ENDPOINTS + RECOVERED_ENDPOINTS);
    const hanging = await holdingReceiver();
    const recovering = await holdingReceiver();
    try {
      for (let i = 0; i < HANGING_ENDPOINTS; i++)
        await nodes.addEndpoint(`${hanging.url}/hanging/${i}`, "created");
      for (let i = 0; i < RECOVERED_ENDPOINTS; i++)
        await nodes.addEndpoint(`${recovering.url}/recovered/${i}`, "ready");

      // A first worker judges all of them slow: every attempt times out after 1.5 s.
      await nodes.notify("created");
      await nodes.notify("ready");
      const first = await nodes.startWorker(1500);
      await waitUntil(
        async () =>
          (await nodes.markedSlow()) === HANGING_ENDPOINTS + RECOVERED_ENDPOINTS ? true : undefined,
        60_000,
        "every endpoint judged slow",
      );
      await nodes.stopWorker(first);

      // The recovering endpoints answer again; their new attempts are newer than the hanging ones'.
      recovering.release();
      await nodes.notify("created");
      await nodes.notify("ready");
      const before = recovering.received.length;
      await nodes.startWorker(120_000, ENOUGH_OPEN_FILES);
      // Long before a hanging attempt times out (2 minutes).
      await recovering.waitFor(before + RECOVERED_ENDPOINTS, 20_000);
    } finally {
      await nodes.close(() => hanging.release());
      await Promise.all([hanging.close(), recovering.close()]);
    }
  }, 240_000);
});
