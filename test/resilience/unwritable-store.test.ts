import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { startTestApp } from "../support/app.ts";
import { runCli } from "../support/cli.ts";
import { createMigratedTestStore, testStoreKind } from "../support/store.ts";
import { mountTmpfs, NO_TMPFS, unmountTmpfs } from "../support/tmpfs.ts";
import { waitUntil } from "../support/wait.ts";

const immutable = (path: string, on: boolean) =>
  execFileSync("chattr", [on ? "+i" : "-i", path], { stdio: "ignore" });

/** Whether `chattr +i` works here and stops even root from writing (ext4 does; tmpfs and overlays may not). */
function immutableFilesRefuseWrites(): boolean {
  const dir = mkdtempSync(join(tmpdir(), "cumulo-chattr-"));
  const file = join(dir, "probe");
  writeFileSync(file, "");
  try {
    immutable(file, true);
    try {
      writeFileSync(file, "x");
      return false;
    } catch {
      return true;
    } finally {
      immutable(file, false);
    }
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/*
 * A SQLite store file the node cannot write: owned by another user (a `cumulo migrate` or restore run
 * as root), on a file system mounted read-only, or immutable. SQLite then opens it read-only without
 * a word; the node said it was ready and answered every write, and most reads, with 500.
 */
describe.runIf(testStoreKind() === "sqlite" && immutableFilesRefuseWrites())(
  "an unwritable SQLite store",
  () => {
    it("stops start-up with one line naming the file and what to change", async () => {
      const dataDir = mkdtempSync(join(tmpdir(), "cumulo-unwritable-"));
      const file = join(dataDir, "cumulo.sqlite");
      try {
        expect((await runCli(["migrate"], { CUMULO_DATA_DIR: dataDir })).code).toBe(0);
        immutable(file, true);
        const refused = await runCli(["migrate"], { CUMULO_DATA_DIR: dataDir });
        expect(refused.code).not.toBe(0);
        expect(refused.stderr).toMatch(
          /^cumulo: cannot open the store \(CUMULO_DATA_DIR\): .*cumulo\.sqlite cannot be written by this process \(EPERM\)/,
        );
      } finally {
        immutable(file, false);
        rmSync(dataDir, { recursive: true, force: true });
      }
    });

    it("names a data dir that exists but cannot be written, before any store file is in it", async () => {
      // SQLite said only "unable to open database file", naming neither the directory nor the cause.
      const dataDir = mkdtempSync(join(tmpdir(), "cumulo-unwritable-dir-"));
      try {
        immutable(dataDir, true);
        const refused = await runCli(["orgs", "list"], { CUMULO_DATA_DIR: dataDir, DATABASE_URL: undefined });
        expect([refused.code, refused.stdout]).toEqual([1, ""]);
        expect(refused.stderr).toBe(
          `cumulo: cannot open the store (CUMULO_DATA_DIR): ${dataDir} cannot be written by this process (EPERM): give the node's user the data dir's files (chown -R), or make its file system writable\n`,
        );
      } finally {
        immutable(dataDir, false);
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
  },
);

/*
 * PostgreSQL that takes no writes: a failover that left DATABASE_URL on the demoted primary (now a
 * standby), or a database set read-only for maintenance. Writes were answered 500.
 */
describe.runIf(testStoreKind() === "postgres")("a PostgreSQL store that takes no writes", () => {
  it("answers 503 meanwhile, not 500, /readyz too, and writes again once it takes them", async () => {
    const store = await createMigratedTestStore();
    const t = await startTestApp({ CUMULO_ROLES: "api" }, { store });
    const database = new URL(store.databaseUrl ?? "").pathname.slice(1);
    const admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await admin.connect();
    // New sessions only: the node's pooled connections are ended so that it opens new ones.
    const readOnly = async (on: boolean) => {
      await admin.query(
        `ALTER DATABASE ${database} SET default_transaction_read_only = ${on ? "on" : "off"}`,
      );
      await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [
        database,
      ]);
    };
    try {
      await readOnly(true);
      // The ended connections are answered 503 as lost ones; then the pool has new, read-only ones,
      // and the node that cannot write asks not to be sent traffic.
      // (The first 503s may still be those of the lost connections, "unavailable".)
      await waitUntil(async () => {
        const answer = await fetch(`${t.baseUrl}/readyz`);
        return answer.status === 503 && ((await answer.json()) as { status: string }).status === "read_only";
      });
      const probe = await fetch(`${t.baseUrl}/readyz`);
      expect([probe.status, await probe.json()]).toEqual([
        503,
        {
          status: "read_only",
          reason:
            "the store answers but takes no writes (a PostgreSQL standby, or default_transaction_read_only on)",
        },
      ]);
      const refused = await t.request("POST", "/v1/media/libraries", { json: { name: "During" } });
      expect([refused.status, refused.body.error]).toEqual([503, "service_unavailable"]);
      expect(refused.headers.get("retry-after")).toBe("5");
      await readOnly(false);
      await waitUntil(
        async () =>
          (await t.request("POST", "/v1/media/libraries", { json: { name: "After" } })).status === 201,
      );
      expect((await fetch(`${t.baseUrl}/readyz`)).status).toBe(200);
    } finally {
      await readOnly(false).catch(() => undefined);
      await admin.end();
      await t.close();
      await store.drop();
    }
  }, 60_000);
});

// QA of 5 December (session 42): /readyz answered 200 "ready" while a full disk had every write of a
// SQLite node answered 503, so no balancer took the node out.
describe.runIf(testStoreKind() === "sqlite")("a SQLite store whose disk fills while the node runs", () => {
  it("is not ready while the disk is full, and ready again once there is room", async (context) => {
    const dir = mkdtempSync(join(tmpdir(), "cumulo-full-"));
    if (!mountTmpfs(dir, "32m")) {
      rmSync(dir, { recursive: true, force: true });
      context.skip(NO_TMPFS);
    }
    const app = await startTestApp(
      {},
      {
        store: {
          kind: "sqlite",
          dataDir: dir,
          databaseUrl: undefined,
          redisPrefix: "cumulo-test-disk-full:",
          drop: async () => {},
        },
      },
    );
    const filler = join(dir, "filler");
    try {
      const ready = await app.request("GET", "/readyz", { anonymous: true });
      expect([ready.status, ready.body]).toEqual([200, { status: "ready" }]);
      const disk = statfsSync(dir);
      writeFileSync(filler, Buffer.alloc(disk.bavail * disk.bsize - 64 * 1024));
      const full = await app.request("GET", "/readyz", { anonymous: true });
      expect([full.status, full.body.status]).toEqual([503, "disk_full"]);
      rmSync(filler);
      expect((await app.request("GET", "/readyz", { anonymous: true })).status).toBe(200);
    } finally {
      await app.close();
      unmountTmpfs(dir);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
