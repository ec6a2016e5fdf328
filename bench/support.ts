import { randomUUID } from "node:crypto";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import autocannon from "autocannon";
import SqliteDatabase from "better-sqlite3";
import Fastify from "fastify";
import { loadConfig } from "../src/config.ts";
import { type RunningCumulo, startCumulo } from "../src/roles.ts";
import { openStore } from "../src/store/database.ts";
import { createTestStore, type TestStore, type TestStoreKind } from "../test/support/store.ts";
import { statCpuMicros } from "./figures.ts";

export const BENCH_KEY = "bench_admin_key_0123456789abcdef";
export const DURATION_S = Number(process.env.BENCH_DURATION ?? 5);
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);

export interface Measurement {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  non2xx: number;
  /** CPU time (µs) per request of this process's threads other than the load's own (Linux only; else NaN). */
  serverCpuMicrosPerRequest: number;
}

/** CPU time (µs) so far of each thread of this process, by thread id (empty where /proc is not there). */
function threadCpu(): Map<string, number> {
  const used = new Map<string, number>();
  let threads: string[];
  try {
    threads = readdirSync("/proc/self/task");
  } catch {
    return used;
  }
  for (const tid of threads) {
    const micros = statCpuMicros(`/proc/self/task/${tid}/stat`);
    if (micros !== undefined) used.set(tid, micros);
  }
  return used;
}

export interface Target {
  url: string;
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  headers?: Record<string, string>;
  body?: string;
}

/**
 * Load from a worker thread, so the client's own work does not share the event loop of a server
 * running in this process (Cumulo and the bare routes do; Prism and nginx run as processes of their own).
 */
export async function measure(target: Target): Promise<Measurement> {
  // The load runs in a thread started after this reading, so only the server's threads are counted.
  const before = threadCpu();
  const result = await autocannon({
    workers: 1,
    url: target.url,
    method: target.method ?? "GET",
    headers: target.headers,
    body: target.body,
    connections: CONNECTIONS,
    duration: DURATION_S,
  });
  return {
    requestsPerSecond: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    serverCpuMicrosPerRequest: serverCpu(before, threadCpu()) / result.requests.total,
  };
}

/** CPU time (µs) the threads present at `before` used until `after`; NaN where /proc is not there. */
function serverCpu(before: Map<string, number>, after: Map<string, number>): number {
  if (before.size === 0) return Number.NaN;
  let used = 0;
  for (const [tid, micros] of before) used += (after.get(tid) ?? micros) - micros;
  return used;
}

/** The floor every figure is compared with: a bare Fastify JSON route in this same process. */
export async function startBaseline(): Promise<{ url: string; close(): Promise<void> }> {
  const app = Fastify({ logger: false });
  app.get("/json", async () => ({
    success: true,
    message: "ok",
    data: { id: "b1b0c2f4-0000-4000-8000-000000000000" },
  }));
  await app.listen({ port: 0, host: "127.0.0.1" });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return { url: `http://127.0.0.1:${port}/json`, close: () => app.close() };
}

export async function startBenchCumulo(
  kind: TestStoreKind,
  env: Record<string, string> = {},
): Promise<{ cumulo: RunningCumulo; store: TestStore; close(): Promise<void> }> {
  const store = await createTestStore(kind);
  const cumulo = await startCumulo(
    loadConfig({
      PORT: "0",
      CUMULO_EDGE_PORT: "off",
      CUMULO_LOG_LEVEL: "warn",
      CUMULO_RATE_LIMIT: "1000000000/1h",
      CUMULO_BOOTSTRAP_API_KEY: BENCH_KEY,
      CUMULO_DATA_DIR: store.dataDir,
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
      ...env,
    }),
  );
  return {
    cumulo,
    store,
    async close() {
      await cumulo.close();
      await store.drop();
    },
  };
}

/** Stores to measure: SQLite always, PostgreSQL when TEST_DATABASE_URL names a server. */
export const benchStores = (): TestStoreKind[] =>
  process.env.TEST_DATABASE_URL ? ["sqlite", "postgres"] : ["sqlite"];

/**
 * What to measure: each store alone and, when TEST_REDIS_URL names a server, PostgreSQL with Redis (the
 * multi-node configuration: shared rate-limit counters, cached key checks invalidated through Redis).
 */
export function benchSetups(): { label: string; kind: TestStoreKind; env: Record<string, string> }[] {
  const setups: { label: string; kind: TestStoreKind; env: Record<string, string> }[] = benchStores().map(
    (kind) => ({ label: kind, kind, env: {} }),
  );
  const redisUrl = process.env.TEST_REDIS_URL;
  if (redisUrl && process.env.TEST_DATABASE_URL)
    setups.push({ label: "postgres+redis", kind: "postgres", env: { REDIS_URL: redisUrl } });
  // BENCH_SETUPS=postgres,postgres+redis measures only those (e.g. to alternate two builds).
  const only = process.env.BENCH_SETUPS?.split(",");
  return only ? setups.filter((setup) => only.includes(setup.label)) : setups;
}

export const formatRow = (cells: (string | number)[], widths: number[]) =>
  cells.map((cell, index) => String(cell).padEnd(widths[index] ?? 10)).join(" ");

/**
 * A SQLite file made by Cumulo's migrations, opened directly with the store's journal, sync and
 * foreign-key pragmas (checkpoints as SQLite makes them by default), holding one organization: for
 * benchmarks of single statements.
 */
export async function migratedSqlite(): Promise<{
  db: SqliteDatabase.Database;
  organizationId: string;
  close(): Promise<void>;
}> {
  const testStore = await createTestStore("sqlite");
  const store = openStore({ dataDir: testStore.dataDir, databaseUrl: undefined });
  await store.migrate();
  await store.close();
  const db = new SqliteDatabase(join(testStore.dataDir, "cumulo.sqlite"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("foreign_keys = ON");
  const now = new Date().toISOString();
  const organizationId = randomUUID();
  db.prepare("insert into organizations (id, name, created_at, updated_at) values (?, ?, ?, ?)").run(
    organizationId,
    "bench",
    now,
    now,
  );
  return {
    db,
    organizationId,
    async close() {
      db.close();
      await testStore.drop();
    },
  };
}
