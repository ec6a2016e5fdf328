import type { ChildProcess } from "node:child_process";
import { Redis } from "ioredis";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { closeCore, openCore } from "../../src/core.ts";
import { createServices } from "../../src/services.ts";
import { ADMIN_KEY, startTestApp, type TestApp } from "../support/app.ts";
import { serve } from "../support/process.ts";
import { createMigratedTestStore, type TestStore, testStoreKind } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import {
  attemptsOf,
  createLibrary,
  emitVideoEvent,
  organizationOf,
  type Receiver,
  startReceiver,
  webhooksPath,
} from "./helpers.ts";

/** A real `cumulo serve` process (api and worker) on the given store. */
const startServer = (store: TestStore) =>
  serve({
    CUMULO_ROLES: "api,worker",
    CUMULO_DATA_DIR: store.dataDir,
    CUMULO_BOOTSTRAP_API_KEY: ADMIN_KEY,
    CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
    CUMULO_WEBHOOK_TIMEOUT_MS: "1500",
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
  });

describe("webhook durability", () => {
  it("loses no delivery when the dispatcher's process is killed mid-flight", async () => {
    const store = await createMigratedTestStore();
    let receiver: Receiver | undefined;
    let server: ChildProcess | undefined;
    const config = loadConfig({
      CUMULO_DATA_DIR: store.dataDir,
      CUMULO_LOG_LEVEL: "silent",
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    });
    try {
      let answering = false;
      receiver = await startReceiver((_request, res) => {
        // Until the restart, requests hang: the first process dies with them in flight.
        if (answering) res.end("ok");
      });
      const first = await startServer(store);
      server = first.child;
      const core = await openCore(config);
      const services = createServices(core);
      try {
        const auth = await services.identity.authenticate(ADMIN_KEY);
        if (!auth) throw new Error("bootstrap key missing");
        const libraryId = await createLibrary(services, auth.organizationId);
        const created = await fetch(`${first.apiUrl}${webhooksPath(libraryId)}`, {
          method: "POST",
          headers: { authorization: `Bearer ${ADMIN_KEY}`, "content-type": "application/json" },
          body: JSON.stringify({ name: "durable", url: receiver.url, events: ["*"] }),
        });
        expect(created.status).toBe(201);
        const count = 20;
        for (let i = 0; i < count; i++) {
          await emitVideoEvent(core.store, services.webhooks, {
            organizationId: auth.organizationId,
            libraryId,
            event: "created",
          });
        }
        // Some attempts are in flight (held by the receiver), the rest still pending.
        await receiver.waitFor(4);
        const before = await core.store.db
          .selectFrom("webhook_deliveries")
          .select(["state", sql<number>`count(*)`.as("n")])
          .groupBy("state")
          .execute();
        expect(before.find((row) => row.state === "sending")?.n).toBeGreaterThan(0);
        server.kill("SIGKILL");
        await new Promise((resolve) => server?.once("exit", resolve));

        answering = true;
        const second = await startServer(store);
        server = second.child;
        const messages = await waitUntil(
          async () => {
            const rows = await core.store.db
              .selectFrom("webhook_deliveries")
              .select(["message_id", "state", "success"])
              .execute();
            const open = rows.filter((row) => row.state !== "done");
            const delivered = new Set(
              rows.filter((row) => row.success === true || row.success === 1).map((r) => r.message_id),
            );
            return open.length === 0 && delivered.size === count ? delivered : undefined;
          },
          15_000,
          "every delivery to succeed after the restart",
        );
        const received = new Set(receiver.received.map((request) => request.headers["webhook-id"]));
        for (const id of messages) expect(received.has(id)).toBe(true);
      } finally {
        await closeCore(core);
      }
    } finally {
      server?.kill("SIGKILL");
      await receiver?.close();
      await store.drop();
    }
  }, 120_000);
});

describe.runIf(testStoreKind() === "postgres")("two dispatchers on one PostgreSQL", () => {
  let store: TestStore;
  let a: TestApp;
  let b: TestApp;
  let receiver: Receiver;
  const seen = new Map<string, number>();
  beforeAll(async () => {
    store = await createMigratedTestStore();
    const env = { CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" };
    a = await startTestApp(env, { store });
    b = await startTestApp(env, { store });
    receiver = await startReceiver((request, res) => {
      const id = String(request.headers["webhook-id"]);
      const receipts = (seen.get(id) ?? 0) + 1;
      seen.set(id, receipts);
      // The first attempt of every message fails, so each is sent exactly twice: attempts 1 and 2.
      res.statusCode = receipts === 1 ? 500 : 200;
      res.end();
    });
  });
  afterAll(async () => {
    await receiver.close();
    await b.close();
    await a.close();
    await store.drop();
  });

  it("never sends the same attempt twice", async () => {
    const organizationId = await organizationOf(a);
    const libraryId = await createLibrary(a.cumulo.services, organizationId);
    const created = await a.request("POST", webhooksPath(libraryId), {
      json: {
        name: "shared",
        url: receiver.url,
        events: ["*"],
        retry_policy: { max_attempts: 3, initial_delay_s: 0.05, multiplier: 1, max_delay_s: 1 },
      },
    });
    expect(created.status).toBe(201);
    const count = 150;
    await a.cumulo.store.db.transaction().execute(async (trx) => {
      for (let i = 0; i < count; i++) {
        await a.cumulo.services.webhooks.emit(trx, {
          event: "test",
          organizationId,
          libraryId,
          endpointId: created.body.data.id,
        });
      }
    });
    a.cumulo.services.webhooks.notify();
    b.cumulo.services.webhooks.notify();
    await receiver.waitFor(count * 2, 20_000);
    // Once no attempt is waiting or in flight, no node can send one again.
    await waitUntil(
      async () => (await attemptsOf(a, created.body.data.id)).open === 0,
      20_000,
      "every attempt to be recorded",
    );
    expect(seen.size).toBe(count);
    expect([...seen.values()].every((receipts) => receipts === 2)).toBe(true);
    const rows = await a.cumulo.store.db
      .selectFrom("webhook_deliveries")
      .select(["message_id", "attempt", "success", "state"])
      .execute();
    expect(rows).toHaveLength(count * 2);
    expect(rows.every((row) => row.state === "done")).toBe(true);
    expect(rows.filter((row) => row.attempt === 2 && row.success === true)).toHaveLength(count);
  }, 120_000);
});

describe("nodes split by role", () => {
  const redisUrl = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

  it("wakes a worker-only node at once when an api-only node commits a notification", async (context) => {
    const probe = new Redis(redisUrl, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    const reachable = await probe.connect().then(
      () => true,
      () => false,
    );
    probe.disconnect();
    if (!reachable) context.skip();

    const store = await createMigratedTestStore();
    const env = { CUMULO_WEBHOOK_ALLOW_PRIVATE: "true", REDIS_URL: redisUrl };
    const api = await startTestApp({ ...env, CUMULO_ROLES: "api" }, { store });
    // The fallback poll is a minute away: only the wake-up through Redis can start these attempts in time.
    const worker = await startTestApp(
      { ...env, CUMULO_ROLES: "worker", CUMULO_WEBHOOK_POLL_MS: "60000" },
      { store },
    );
    const receiver = await startReceiver();
    try {
      const organizationId = await organizationOf(api);
      const libraryId = await createLibrary(api.cumulo.services, organizationId);
      const created = await api.request("POST", webhooksPath(libraryId), {
        json: { name: "split", url: receiver.url, events: ["*"] },
      });
      expect(created.status).toBe(201);
      for (let i = 0; i < 10; i++) {
        await emitVideoEvent(api.cumulo.store, api.cumulo.services.webhooks, {
          organizationId,
          libraryId,
          event: "ready",
        });
        await receiver.waitFor(i + 1, 10_000);
      }
    } finally {
      await receiver.close();
      await worker.close();
      await api.close();
      await store.drop();
    }
  }, 90_000);
});
