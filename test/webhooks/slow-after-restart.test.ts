import { existsSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import { startTestApp } from "../support/app.ts";
import { type Served, serve, stopAll } from "../support/process.ts";
import { createMigratedTestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import { createEndpoint, createLibrary, emitVideoEvent, organizationOf, startReceiver } from "./helpers.ts";

// At an open-file limit of 600 a process has 256 slots for the others' attempts and 44 for slow
// ones (src/webhooks/connection-budget.ts): 400 endpoints that hold requests open are more than both.
const OPEN_FILES = 600;
const HANGING_ENDPOINTS = 400;

describe.skipIf(!existsSync("/usr/bin/prlimit"))("webhook endpoints judged slow, across a restart", () => {
  // QA of session 54: a restarted process knew no endpoint as slow, so endpoints that hang took every
  // slot again and a fast endpoint waited for their timeout after each restart.
  it("serves a fast endpoint at once after a restart, though more endpoints hang than it has slots", async () => {
    const store = await createMigratedTestStore();
    const held: ServerResponse[] = [];
    const hanging = await startReceiver((_request, res) => {
      held.push(res);
    });
    const fast = await startReceiver();
    // Endpoints and notifications come through a node that sends nothing.
    const api = await startTestApp(
      {
        CUMULO_ROLES: "api",
        CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
        CUMULO_WEBHOOK_ENDPOINTS_MAX: String(HANGING_ENDPOINTS + 1),
        CUMULO_RATE_LIMIT: "100000/1m",
      },
      { store },
    );
    const nodes: Served[] = [];
    const worker = async (timeoutMs: number, launcher: string[] = []) => {
      const node = await serve(
        {
          CUMULO_DATA_DIR: store.dataDir,
          DATABASE_URL: store.databaseUrl,
          CUMULO_ROLES: "worker",
          CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
          CUMULO_WEBHOOK_TIMEOUT_MS: String(timeoutMs),
        },
        ["serve"],
        90_000,
        launcher,
      );
      nodes.push(node);
      return node;
    };
    try {
      const organizationId = await organizationOf(api);
      const libraryId = await createLibrary(api.cumulo.services, organizationId);
      for (let i = 0; i < HANGING_ENDPOINTS; i++) {
        await createEndpoint(api, libraryId, { url: `${hanging.url}/hanging/${i}`, events: ["created"] });
      }
      await createEndpoint(api, libraryId, { url: `${fast.url}/fast`, events: ["ready"] });
      const notify = (event: "created" | "ready") =>
        emitVideoEvent(api.cumulo.store, api.cumulo.services.webhooks, { organizationId, libraryId, event });
      const markedSlow = async () =>
        Number(
          (
            await api.cumulo.store.db
              .selectFrom("webhook_slow_endpoints")
              .select((eb) => eb.fn.countAll().as("count"))
              .executeTakeFirstOrThrow()
          ).count,
        );

      // A first worker: every hanging endpoint's attempt times out after 1.5 s, and is judged slow.
      await notify("created");
      const first = await worker(1500);
      await waitUntil(
        async () => ((await markedSlow()) === HANGING_ENDPOINTS ? true : undefined),
        60_000,
        "every hanging endpoint judged slow",
      );
      await stopAll([first]);
      nodes.splice(nodes.indexOf(first), 1);

      // While no worker runs: one more attempt to each hanging endpoint, then the fast endpoint's,
      // newer than all of them.
      await notify("created");
      await notify("ready");
      await worker(120_000, ["/usr/bin/prlimit", `--nofile=${OPEN_FILES}:${OPEN_FILES}`]);
      // Long before a hanging attempt times out (2 minutes): the restarted worker knew them as slow.
      await fast.waitFor(1, 20_000);
      expect(fast.received[0]?.path).toBe("/fast");
      expect(await markedSlow()).toBe(HANGING_ENDPOINTS);
    } finally {
      // Attempts still on their way are answered too: a stop waits for every attempt in flight.
      hanging.respond = (_request, res) => res.end("late");
      for (const res of held) res.end("late");
      await stopAll(nodes);
      await api.close();
      await Promise.all([hanging.close(), fast.close()]);
      await store.drop();
    }
  }, 240_000);
});
