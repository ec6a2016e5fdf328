import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import SqliteDatabase from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { allMigrations } from "../../src/store/migrations/index.ts";
import { exitOf } from "../support/process.ts";
import { createTestStore, type TestStore, testStoreKind } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";

const MIGRATING_PROCESS = fileURLToPath(new URL("../support/migrating-process.ts", import.meta.url));

interface Migrating {
  child: ChildProcess;
  output: () => string;
}

/** Every process a test started, killed after it whatever happened. */
const started: Migrating[] = [];

/** Starts test/support/migrating-process.ts on `dataDir` and waits until it has opened the store. */
async function startMigrating(dataDir: string, env: Record<string, string> = {}): Promise<Migrating> {
  const child = spawn(process.execPath, ["--import", "tsx", MIGRATING_PROCESS], {
    env: { ...process.env, CUMULO_DATA_DIR: dataDir, ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk) => {
    output += chunk;
  });
  child.stderr.on("data", (chunk) => {
    output += chunk;
  });
  const migrating = { child, output: () => output };
  started.push(migrating);
  await waitUntil(() => output.includes("opened\n") || child.exitCode !== null, 30_000, "the store opened");
  expect(output).toContain("opened\n");
  return migrating;
}

// Ended, not only written: an open stdin would keep the process alive once it has migrated.
const go = (migrating: Migrating) => migrating.child.stdin?.end("go\n");

/** The migrations recorded in the store's file, read by a connection of the test's own. */
function appliedMigrations(dataDir: string): string[] {
  const file = new SqliteDatabase(join(dataDir, "cumulo.sqlite"), { readonly: true });
  try {
    return file.prepare("select name from kysely_migration order by name").pluck().all() as string[];
  } finally {
    file.close();
  }
}

const everyMigration = Object.keys(allMigrations("sqlite")).sort();

describe.skipIf(testStoreKind() !== "sqlite")(
  "SQLite migrations run by several processes",
  { timeout: 90_000 },
  () => {
    let testStore: TestStore;

    beforeEach(async () => {
      testStore = await createTestStore("sqlite");
    });
    afterEach(async () => {
      for (const migrating of started.splice(0)) migrating.child.kill("SIGKILL");
      await testStore.drop();
    });

    it("migrates a fresh data dir once when several processes start on it at the same moment", async () => {
      // Each opens the fresh file first, so that all begin migrating within a few milliseconds.
      const all = await Promise.all([1, 2, 3, 4].map(() => startMigrating(testStore.dataDir)));
      all.forEach(go);
      const codes = await Promise.all(all.map((migrating) => exitOf(migrating.child)));
      const outputs = all.map((migrating) => migrating.output());
      expect(codes, outputs.join("\n")).toEqual([0, 0, 0, 0]);
      for (const output of outputs) expect(output).toMatch(/^migrated /m);
      expect(appliedMigrations(testStore.dataDir)).toEqual(everyMigration);
    });

    it("waits, saying so, while another process holds the write lock past the busy timeout", async () => {
      // Stands for another process running a long migration.
      const other = new SqliteDatabase(join(testStore.dataDir, "cumulo.sqlite"));
      try {
        other.pragma("journal_mode = WAL");
        other.exec("begin immediate");
        const migrating = await startMigrating(testStore.dataDir);
        go(migrating);
        // The store's busy timeout is 5 s.
        await waitUntil(
          () => migrating.output().includes("waiting\n") || migrating.child.exitCode !== null,
          30_000,
          "the waiting line",
        );
        expect(migrating.output()).toContain("waiting\n");
        other.exec("commit");
        expect(await exitOf(migrating.child), migrating.output()).toBe(0);
      } finally {
        other.close();
      }
      expect(appliedMigrations(testStore.dataDir)).toEqual(everyMigration);
    });

    it("leaves the store as it was when a process dies mid-migration, and the next one migrates it", async () => {
      // Well inside the run (about 140 queries): some tables made, their migration not yet recorded.
      const crashing = await startMigrating(testStore.dataDir, { KILL_AT_QUERY: "30" });
      go(crashing);
      await exitOf(crashing.child);
      expect(crashing.child.signalCode, crashing.output()).toBe("SIGKILL");
      const file = new SqliteDatabase(join(testStore.dataDir, "cumulo.sqlite"), { readonly: true });
      try {
        const tables = file.prepare("select name from sqlite_master where type = 'table'").pluck().all();
        expect(tables).toEqual([]);
      } finally {
        file.close();
      }

      const next = await startMigrating(testStore.dataDir);
      go(next);
      expect(await exitOf(next.child), next.output()).toBe(0);
      expect(appliedMigrations(testStore.dataDir)).toEqual(everyMigration);
    });
  },
);
