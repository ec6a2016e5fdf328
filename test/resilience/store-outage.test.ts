import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/store/database.ts";
import { isStoreUnavailable } from "../../src/store/unavailable.ts";
import { edgeRequest, type Origin, startOrigin, uniqueHost } from "../cdn/support.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { exitOf, type Served, serve } from "../support/process.ts";
import {
  createMigratedTestStore,
  databaseOf,
  endConnections,
  onAdminDatabase,
  type TestStore,
  takeWriteLock,
  testStoreKind,
} from "../support/store.ts";
import { startTcpRelay, type TcpRelay } from "../support/tcp-relay.ts";
import { settledWithin, waitUntil } from "../support/wait.ts";

const KEY = "store_outage_key_0123456789";

/** A node whose PostgreSQL connections all go through a relay the test can cut or freeze. */
async function serveBehindRelay(store: TestStore, env: Record<string, string> = {}) {
  const url = new URL(store.databaseUrl ?? "");
  const relay = await startTcpRelay(url.hostname, Number(url.port || 5432));
  url.hostname = "127.0.0.1";
  url.port = String(relay.port);
  const node = await serve({
    CUMULO_DATA_DIR: store.dataDir,
    DATABASE_URL: url.toString(),
    CUMULO_BOOTSTRAP_API_KEY: KEY,
    CUMULO_PG_CONNECT_TIMEOUT_MS: "1000",
    CUMULO_RATE_LIMIT: "100000/1m",
    ...env,
  });
  return { relay, node };
}

/*
 * The store failing under a running node: PostgreSQL going away (a restart, a failover, the network),
 * SQLite's write lock held past the busy timeout. The node stays up and answers 503 with Retry-After
 * until the store is back, never 500; a PostgreSQL connection lost mid-query used to end the process.
 */
describe.runIf(process.env.CUMULO_TEST_STORE === "postgres")("a PostgreSQL outage", () => {
  let store: TestStore;
  let relay: TcpRelay;
  let node: Served;
  const call = (path: string, init: RequestInit & { cloud?: boolean } = {}) =>
    fetch(`${node.apiUrl}${path}`, {
      ...init,
      headers: init.cloud
        ? { apikey: KEY }
        : { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    });
  const edge = (host: string) => fetch(`${node.edgeUrl}/${host}/a.txt`);

  let origin: Origin;
  beforeAll(async () => {
    origin = await startOrigin();
    for (const path of ["/kept.txt", "/fresh.txt"]) {
      origin.route(path, (_request, response) =>
        response.writeHead(200, { "content-type": "text/plain", "cache-control": "max-age=300" }).end(path),
      );
    }
    store = await createMigratedTestStore();
    ({ relay, node } = await serveBehindRelay(store, {
      CUMULO_EDGE_PORT: "0",
      CUMULO_METRICS_PORT: "0",
      CUMULO_ORIGIN_ALLOW_PRIVATE: "true",
    }));
  });
  afterAll(async () => {
    if (node && node.child.exitCode === null) {
      node.child.kill("SIGTERM");
      await exitOf(node.child);
    }
    await relay?.close();
    await store?.drop();
    await origin?.close();
  });

  it("answers 503 while PostgreSQL is away, survives connections lost mid-query, and recovers", async () => {
    expect((await call("/v1/media/libraries")).status).toBe(200);
    const hostname = uniqueHost("outage");
    const created = await call("/v1/cdn/distributions", {
      method: "POST",
      body: JSON.stringify({ hostname, origin_url: origin.url }),
    });
    expect(created.status).toBe(201);
    expect((await edgeRequest(node.edgeUrl ?? "", "/kept.txt", { host: hostname })).status).toBe(200);
    // Queries in flight when every connection drops.
    const inFlight = Array.from({ length: 40 }, () => call("/v1/media/libraries").then((r) => r.status));
    await new Promise((resolve) => setTimeout(resolve, 5));
    const loggedBefore = node.output().length;
    await relay.cut();
    for (const status of await Promise.all(inFlight)) expect([200, 503]).toContain(status);

    const media = await call("/v1/media/libraries");
    expect(media.status).toBe(503);
    expect(media.headers.get("retry-after")).toBe("5");
    expect(await media.json()).toEqual({
      success: false,
      error: "service_unavailable",
      message: "The service is briefly unavailable; try again shortly",
    });
    const write = await call("/v1/media/libraries", { method: "POST", body: JSON.stringify({ name: "x" }) });
    expect(write.status).toBe(503);
    const cloud = await call("/v1/user-resource/token/list", { cloud: true });
    expect(cloud.status).toBe(503);
    expect(cloud.headers.get("retry-after")).toBe("5");
    expect(await cloud.json()).toMatchObject({
      message: "The service is briefly unavailable; try again shortly",
    });
    // The edge keeps serving a name it had read: its cached objects, and its origin for the rest.
    await new Promise((resolve) => setTimeout(resolve, 600)); // past the 0.5 s it trusts a name
    const kept = await edgeRequest(node.edgeUrl ?? "", "/kept.txt", { host: hostname });
    expect([kept.status, kept.headers["x-cache"]]).toEqual([200, "HIT"]);
    const fresh = await edgeRequest(node.edgeUrl ?? "", "/fresh.txt", { host: hostname });
    expect([fresh.status, fresh.headers["x-cache"]]).toEqual([200, "MISS"]);
    const unknownHost = await edge("outage.example.test");
    expect(unknownHost.status).toBe(503);
    expect(unknownHost.headers.get("retry-after")).toBe("5");
    expect((await fetch(`${node.apiUrl}/readyz`)).status).toBe(503);
    // The probes of the metrics listener, for nodes without an API port, say the same.
    const probe = await fetch(`${node.metricsUrl}/readyz`);
    expect([probe.status, await probe.json()]).toEqual([503, { status: "unavailable" }]);
    expect((await fetch(`${node.metricsUrl}/healthz`)).status).toBe(200);
    // Metrics go on without the store's figures, and say the store does not answer (before the QA
    // of session 48: 500 at every scrape, so only "node down" could fire).
    const scraped = await fetch(`${node.metricsUrl}/metrics`);
    const exposition = await scraped.text();
    expect(scraped.status).toBe(200);
    expect(exposition).toMatch(/^cumulo_store_up 0$/m);
    expect(exposition).toMatch(/^cumulo_store_pool_waiting_requests \d+$/m);
    expect(exposition).not.toMatch(/^cumulo_jobs\{/m);
    expect(exposition).toMatch(/^cumulo_http_requests_total\{.*status="503"\} \d+$/m);
    expect(node.child.exitCode).toBeNull();

    // A second of the workers' claims against the missing store: warnings, not errors.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const errors = node
      .output()
      .slice(loggedBefore)
      .split("\n")
      .filter((line) => line.startsWith('{"level":50'));
    expect(errors).toEqual([]);
    await relay.restore();
    await waitUntil(async () => (await call("/v1/media/libraries")).status === 200, 15_000, "the store back");
    const after = await call("/v1/media/libraries", {
      method: "POST",
      body: JSON.stringify({ name: "after" }),
    });
    expect(after.status).toBe(201);
    await waitUntil(
      async () => /^cumulo_store_up 1$/m.test(await (await fetch(`${node.metricsUrl}/metrics`)).text()),
      15_000,
      "metrics to read the store again",
    );
    // The worker claims jobs again: the new library's distribution is provisioned.
    const { data } = (await after.json()) as { data: { id: string } };
    await waitUntil(
      async () =>
        ((await (await call(`/v1/media/libraries/${data.id}`)).json()) as { data: { status: string } }).data
          .status === "active",
      15_000,
      "the library provisioned after the outage",
    );
    expect(node.output()).not.toMatch(/Unhandled 'error' event|uncaught/i);
    // Each background loop said once that the store was away, not once a try (QA of session 48).
    const outage = node.output().slice(loggedBefore);
    for (const message of ["job claim failed", "webhook claim failed", "kept answers off"]) {
      expect(outage.split(`"msg":"${message}`).length - 1, message).toBeLessThanOrEqual(1);
    }
    expect(outage).toContain('"msg":"job claim failed: store unavailable; logged again once it works"');
    node.child.kill("SIGTERM");
    expect(await exitOf(node.child)).toBe(0);
  }, 90_000);
});

/*
 * A PostgreSQL server that stops answering without closing anything (a stopped process, a network
 * dropping packets): connections stay open and no query is ever answered. Before session 59 a request
 * waited as long as its client did, and SIGTERM did not end the node (src/store/pg-stall-watchdog.ts).
 * The relay holds every byte meanwhile, so what PostgreSQL would answer afterwards arrives late.
 */
describe.runIf(process.env.CUMULO_TEST_STORE === "postgres")(
  "a PostgreSQL server that stops answering",
  () => {
    let store: TestStore;
    let relay: TcpRelay;
    let node: Served;
    /** Far longer than the node needs (about three connect timeouts): reaching it means a hang. */
    const HANG_MS = 20_000;
    const call = (path: string, init: RequestInit = {}) =>
      fetch(`${node.apiUrl}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        signal: AbortSignal.timeout(HANG_MS),
      });
    beforeAll(async () => {
      store = await createMigratedTestStore();
      ({ relay, node } = await serveBehindRelay(store));
    });
    afterAll(async () => {
      relay?.thaw();
      if (node && node.child.exitCode === null && node.child.signalCode === null) {
        node.child.kill("SIGKILL");
        await exitOf(node.child);
      }
      await relay?.close();
      await store?.drop();
    });

    it("answers 503 instead of waiting, serves again once the server answers, and stops on SIGTERM", async () => {
      expect((await call("/v1/media/libraries")).status).toBe(200);
      relay.freeze();
      const read = await call("/v1/media/libraries");
      expect([read.status, read.headers.get("retry-after")]).toEqual([503, "5"]);
      expect(await read.json()).toMatchObject({ error: "service_unavailable" });
      const write = await call("/v1/media/libraries", {
        method: "POST",
        body: JSON.stringify({ name: "x" }),
      });
      expect(write.status).toBe(503);

      relay.thaw();
      await waitUntil(
        async () => (await call("/v1/media/libraries")).status === 200,
        15_000,
        "the store back",
      );
      const created = await call("/v1/media/libraries", {
        method: "POST",
        body: JSON.stringify({ name: "y" }),
      });
      expect(created.status).toBe(201);

      // Frozen again under a node that is then told to stop: its workers' queries fail, and it exits.
      relay.freeze();
      const stopping = call("/v1/media/libraries").then((response) => response.status);
      await new Promise((resolve) => setTimeout(resolve, 200));
      node.child.kill("SIGTERM");
      expect(await settledWithin(exitOf(node.child), HANG_MS, "the node's exit")).toBe(0);
      expect(await stopping).toBe(503);
      expect(node.output()).not.toMatch(/Unhandled 'error' event|uncaught/i);
    }, 90_000);

    it("lets a node with no query in flight stop on SIGTERM", async () => {
      const apiOnly = await serveBehindRelay(store, { CUMULO_ROLES: "api" });
      try {
        apiOnly.relay.freeze();
        apiOnly.node.child.kill("SIGTERM");
        expect(await settledWithin(exitOf(apiOnly.node.child), HANG_MS, "the node's exit")).toBe(0);
      } finally {
        apiOnly.node.child.kill("SIGKILL");
        apiOnly.relay.thaw();
        await apiOnly.relay.close();
      }
    }, 90_000);
  },
);

// The other side of the same watch: a server that answers its probe is busy, not gone.
describe.runIf(testStoreKind() === "postgres")("a PostgreSQL query that takes longer than a connect", () => {
  let testStore: TestStore;
  let store: Store;
  beforeAll(async () => {
    testStore = await createMigratedTestStore();
    store = openStore({
      dataDir: testStore.dataDir,
      databaseUrl: testStore.databaseUrl,
      pgConnectTimeoutMs: 300,
    });
  });
  afterAll(async () => {
    await store?.close();
    await testStore?.drop();
  });

  it("is answered, also while it waits for a lock another session holds", async () => {
    const slept = await sql<{ done: number }>`select 1 as done from pg_sleep(1.5)`.execute(store.db);
    expect(slept.rows).toEqual([{ done: 1 }]);
    const holder = new pg.Client({ connectionString: testStore.databaseUrl });
    await holder.connect();
    try {
      await holder.query("begin");
      await holder.query("lock table organizations in access exclusive mode");
      const waiting = sql`select count(*) from organizations`.execute(store.db);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await holder.query("commit");
      expect((await waiting).rows).toHaveLength(1);
    } finally {
      await holder.end();
    }
  });
});

// A database set to refuse connections (`ALLOW_CONNECTIONS false`, as for maintenance) answers a
// new connection with SQLSTATE 55000, which was taken for a fault of the request: 500 on every route.
describe.runIf(testStoreKind() === "postgres")("a PostgreSQL database that refuses connections", () => {
  let app: TestApp;
  let database: string;
  beforeAll(async () => {
    app = await startTestApp({ CUMULO_PG_CONNECT_TIMEOUT_MS: "1000" });
    database = databaseOf(app.store);
  });
  afterAll(async () => {
    await onAdminDatabase(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`);
    await app?.close();
  });

  it("answers 503 with Retry-After until it takes connections again", async () => {
    expect((await app.request("GET", "/v1/media/libraries")).status).toBe(200);
    await onAdminDatabase(`ALTER DATABASE ${database} ALLOW_CONNECTIONS false`);
    await endConnections(database);
    await waitUntil(
      async () => (await app.request("GET", "/v1/media/libraries")).status !== 200,
      5000,
      "the node to lose its connections",
    );
    const media = await app.request("GET", "/v1/media/libraries");
    expect([media.status, media.headers.get("retry-after")]).toEqual([503, "5"]);
    const cloud = await app.cloud("GET", "/v1/user-resource/token/list");
    expect([cloud.status, cloud.headers.get("retry-after")]).toEqual([503, "5"]);

    await onAdminDatabase(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`);
    await waitUntil(
      async () => (await app.request("GET", "/v1/media/libraries")).status === 200,
      10_000,
      "the store back",
    );
  });
});

describe.runIf(testStoreKind() === "sqlite")("SQLite's write lock held by another process", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it("waits for it without stopping the node, and answers 503 once it has waited the busy timeout", async () => {
    // Another process (the CLI, a second node, a migration) holding the write lock. It is taken
    // between the node's own writes: waiting inside SQLite here would keep them from finishing.
    const other = new Database(join(app.store.dataDir, "cumulo.sqlite"), { timeout: 0 });
    try {
      // The admin key used once: verified and its use stamped before the lock is taken.
      expect((await app.request("GET", "/v1/media/libraries")).status).toBe(200);
      await takeWriteLock(other);
      let settled = false;
      const waiting = app.request("POST", "/v1/media/libraries", { json: { name: "waited" } });
      void waiting.finally(() => {
        settled = true;
      });
      // The node goes on answering while the write waits: SQLite's busy wait held the whole process.
      expect((await app.request("GET", "/healthz", { anonymous: true })).status).toBe(200);
      // Reads of the store too (a search no kept answer holds): the waiting write gives the one
      // connection back between its tries, where every query queued behind it (QA of session 48).
      const read = await app.request("GET", `/v1/media/libraries?search=${randomUUID()}`);
      expect([read.status, settled]).toEqual([200, false]);
      other.exec("commit");
      expect((await waiting).status).toBe(201);

      const library = (await app.request("POST", "/v1/media/libraries", { json: { name: "uploads" } })).body
        .data.id;
      const video = (
        await app.request("POST", `/v1/media/libraries/${library}/videos`, { json: { title: "v" } })
      ).body.data.id;
      // A key never used: its first use stamps it, a write.
      const fresh = (await app.request("POST", "/v1/organization/api-keys", { json: { name: "fresh" } })).body
        .data.api_key;
      await takeWriteLock(other);
      // A resumable upload's creation too (QA of 5 December, session 42: a plain 500).
      const [refused, upload, firstUse] = await Promise.all([
        app.request("POST", "/v1/media/libraries", { json: { name: "refused" } }),
        fetch(`${app.baseUrl}/v1/media/tus`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${app.adminKey}`,
            "tus-resumable": "1.0.0",
            "upload-length": "100",
            "upload-metadata": `library_id ${btoa(library)},video_id ${btoa(video)}`,
          },
        }),
        // Its stamp cannot be written past the wait: the read goes on without it (a 503 before).
        app.request("GET", "/v1/media/libraries", { key: fresh }),
      ]);
      expect([upload.status, upload.headers.get("retry-after")]).toEqual([503, "10"]);
      expect(await upload.text()).toBe("The service is briefly unavailable; try again shortly\n");
      expect(firstUse.status).toBe(200);
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("5");
      expect(refused.body).toEqual({
        success: false,
        error: "service_unavailable",
        message: "The service is briefly unavailable; try again shortly",
      });
      other.exec("rollback");
      const names = (await app.request<{ data: { name: string }[] }>("GET", "/v1/media/libraries")).body.data;
      expect(names.map((library) => library.name)).toEqual(["uploads", "waited"]);
    } finally {
      if (other.inTransaction) other.exec("rollback");
      other.close();
    }
  });
});

describe("the store's failures as they are classed", () => {
  it("takes SQLite's lock held past the busy timeout for an unavailable store, and a constraint for none", () => {
    const dir = mkdtempSync(join(tmpdir(), "cumulo-busy-"));
    const holder = new Database(join(dir, "s.sqlite"));
    const waiter = new Database(join(dir, "s.sqlite"), { timeout: 0 });
    try {
      holder.pragma("journal_mode = WAL");
      holder.exec("create table t (id integer primary key)");
      holder.exec("begin immediate");
      const busy = (() => {
        try {
          waiter.exec("begin immediate");
        } catch (error) {
          return error;
        }
      })();
      expect((busy as { code?: string }).code).toBe("SQLITE_BUSY");
      expect(isStoreUnavailable(busy)).toBe(true);
      holder.exec("insert into t values (1)");
      const duplicate = (() => {
        try {
          holder.exec("insert into t values (1)");
        } catch (error) {
          return error;
        }
      })();
      expect(isStoreUnavailable(duplicate)).toBe(false);
      expect(isStoreUnavailable(new Error("Connection terminated unexpectedly"))).toBe(true);
      expect(isStoreUnavailable(new TypeError("x is undefined"))).toBe(false);
    } finally {
      holder.close();
      waiter.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
