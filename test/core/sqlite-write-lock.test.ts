import { join } from "node:path";
import SqliteDatabase from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/store/database.ts";
import {
  openSqliteTestStore,
  type SqliteTestStore,
  testStoreKind,
  withNoRoomForNewPages,
} from "../support/store.ts";

describe.skipIf(testStoreKind() !== "sqlite")("SQLite transactions and other processes", () => {
  let testStore: SqliteTestStore;
  let store: Store;

  beforeAll(async () => {
    testStore = await openSqliteTestStore();
    store = testStore.store;
  });

  afterAll(async () => {
    await testStore.close();
  });

  it("holds the write lock from the start, so a read then a write cannot meet another process's commit", async () => {
    // A second connection stands for another process (SQLite's locks hold between connections of one
    // process too); it does not wait, so a lock held by the store shows at once.
    const other = new SqliteDatabase(join(testStore.dataDir, "cumulo.sqlite"));
    other.pragma("busy_timeout = 0");
    try {
      let otherWrite: unknown;
      await store.db.transaction().execute(async (trx) => {
        await trx.selectFrom("organizations").select("id").execute();
        try {
          const now = new Date().toISOString();
          other
            .prepare("insert into organizations (id, name, created_at, updated_at) values (?, ?, ?, ?)")
            .run("00000000-0000-4000-8000-0000000000aa", "other process", now, now);
        } catch (error) {
          otherWrite = error;
        }
        // With the lock taken only here, the other process's commit above made this snapshot stale
        // and SQLite refused this write at once ("database is locked").
        await trx
          .insertInto("organizations")
          .values({
            id: "00000000-0000-4000-8000-0000000000bb",
            name: "store",
            created_at: new Date().toISOString(),
            updated_at: new Date().toISOString(),
          })
          .execute();
      });
      expect((otherWrite as { code?: string } | undefined)?.code).toBe("SQLITE_BUSY");
      const names = await store.db.selectFrom("organizations").select("name").execute();
      expect(names.map((row) => row.name)).toContain("store");
    } finally {
      other.close();
    }
  });

  it("waits for another process's write lock on a timer, leaving the event loop free", async () => {
    const other = new SqliteDatabase(join(testStore.dataDir, "cumulo.sqlite"));
    try {
      other.exec("begin immediate");
      // Released only by a timer: a write that sleeps inside SQLite's busy handler keeps it from
      // running, and fails after the busy timeout with the lock still held.
      const released = new Promise<void>((resolve) =>
        setTimeout(() => {
          other.exec("commit");
          resolve();
        }, 50),
      );
      const now = new Date().toISOString();
      const written = store.db
        .insertInto("organizations")
        .values({
          id: "00000000-0000-4000-8000-0000000000dd",
          name: "waited",
          created_at: now,
          updated_at: now,
        })
        .execute();
      const inTransaction = store.db.transaction().execute((trx) =>
        trx
          .insertInto("organizations")
          .values({
            id: "00000000-0000-4000-8000-0000000000ee",
            name: "waited too",
            created_at: now,
            updated_at: now,
          })
          .execute(),
      );
      await Promise.all([written, inTransaction, released]);
      const names = await store.db.selectFrom("organizations").select("name").execute();
      expect(names.map((row) => row.name)).toEqual(expect.arrayContaining(["waited", "waited too"]));
    } finally {
      if (other.inTransaction) other.exec("rollback");
      other.close();
    }
  });

  it("reports the error that ended a transaction SQLite rolled back by itself (a full disk)", async () => {
    await withNoRoomForNewPages(store.db, async () => {
      const failed = store.db.transaction().execute(async (trx) => {
        const now = new Date().toISOString();
        await trx
          .insertInto("organizations")
          .values({
            id: "00000000-0000-4000-8000-0000000000cc",
            name: "x".repeat(200_000),
            created_at: now,
            updated_at: now,
          })
          .execute();
      });
      await expect(failed).rejects.toThrow("database or disk is full");
    });
    // The store goes on.
    expect((await store.db.selectFrom("organizations").select("id").execute()).length).toBeGreaterThan(0);
  });
});
