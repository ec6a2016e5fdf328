import { join } from "node:path";
import SqliteDatabase from "better-sqlite3";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Store } from "../../src/store/database.ts";
import { isCacheableRead, SqliteReadCache } from "../../src/store/sqlite-read-cache.ts";
import { runCli } from "../support/cli.ts";
import { openSqliteTestStore, type SqliteTestStore, testStoreKind } from "../support/store.ts";

const STAMP = "2026-11-21T10:00:00.000Z";

// The read cache exists on SQLite only (src/store/sqlite-read-cache.ts).
describe.skipIf(testStoreKind() !== "sqlite")("SQLite read cache", () => {
  let testStore: SqliteTestStore;
  let store: Store;

  const organization = (id: string, name: string) => ({ id, name, created_at: STAMP, updated_at: STAMP });
  const nameOf = async (id: string) =>
    (await store.db.selectFrom("organizations").select("name").where("id", "=", id).executeTakeFirst())?.name;

  beforeAll(async () => {
    testStore = await openSqliteTestStore();
    store = testStore.store;
    await store.db
      .insertInto("organizations")
      .values([
        organization("00000000-0000-4000-8000-000000000001", "first"),
        organization("00000000-0000-4000-8000-000000000002", "second"),
      ])
      .execute();
  });
  afterAll(async () => {
    await testStore.close();
  });

  it("answers a read after a write on the same connection with the written rows", async () => {
    const id = "00000000-0000-4000-8000-000000000001";
    expect(await nameOf(id)).toBe("first");
    await store.db.updateTable("organizations").set({ name: "renamed" }).where("id", "=", id).execute();
    expect(await nameOf(id)).toBe("renamed");
    await store.db.deleteFrom("organizations").where("id", "=", id).execute();
    expect(await nameOf(id)).toBeUndefined();
  });

  it("sees a commit made by another connection and by another process", async () => {
    const id = "00000000-0000-4000-8000-000000000002";
    expect(await nameOf(id)).toBe("second");
    const other = new SqliteDatabase(join(testStore.dataDir, "cumulo.sqlite"));
    try {
      other.prepare("update organizations set name = 'from elsewhere' where id = ?").run(id);
    } finally {
      other.close();
    }
    // `data_version` is read once per callback into JavaScript (src/store/database.ts,
    // `oncePerCallback`): a request that arrives after the commit is handled in a later callback.
    await new Promise((resolve) => setImmediate(resolve));
    expect(await nameOf(id)).toBe("from elsewhere");

    const count = async () =>
      (
        await store.db
          .selectFrom("organizations")
          .select((eb) => eb.fn.countAll<number>().as("n"))
          .executeTakeFirst()
      )?.n;
    const before = await count();
    const created = await runCli(["orgs", "create", "--name", "From the CLI"], {
      CUMULO_DATA_DIR: testStore.dataDir,
      DATABASE_URL: undefined,
    });
    expect(created.code).toBe(0);
    expect(await count()).toBe(Number(before) + 1);
  }, 60_000);

  it("reads a transaction's own writes inside it, and the old rows after its rollback", async () => {
    const id = "00000000-0000-4000-8000-000000000003";
    await store.db.insertInto("organizations").values(organization(id, "before")).execute();
    expect(await nameOf(id)).toBe("before");
    const rolledBack = store.db.transaction().execute(async (trx) => {
      const inside = () =>
        trx.selectFrom("organizations").select("name").where("id", "=", id).executeTakeFirstOrThrow();
      expect((await inside()).name).toBe("before");
      await trx.updateTable("organizations").set({ name: "inside" }).where("id", "=", id).execute();
      expect((await inside()).name).toBe("inside");
      throw new Error("roll back");
    });
    await expect(rolledBack).rejects.toThrow("roll back");
    expect(await nameOf(id)).toBe("before");
  });

  it("hands out rows that no caller shares", async () => {
    const id = "00000000-0000-4000-8000-000000000004";
    await store.db.insertInto("organizations").values(organization(id, "mine")).execute();
    const first = await store.db.selectFrom("organizations").selectAll().where("id", "=", id).execute();
    const [row] = first;
    if (row) row.name = "changed by a caller";
    first.pop();
    const second = await store.db.selectFrom("organizations").selectAll().where("id", "=", id).execute();
    expect(second).toEqual([organization(id, "mine")]);
    const third = await store.db.selectFrom("organizations").selectAll().where("id", "=", id).execute();
    expect(third[0]).not.toBe(second[0]);
  });

  it("runs every time the reads that can change with no write, and writes that return rows", async () => {
    const random = async () => (await sql<{ r: number }>`select random() as r`.execute(store.db)).rows[0]?.r;
    expect(await random()).not.toBe(await random());
    await sql`create temp table counted (n integer)`.execute(store.db);
    const insert = sql<{ n: number }>`insert into counted values (1) returning n`;
    expect((await insert.execute(store.db)).rows).toEqual([{ n: 1 }]);
    expect((await insert.execute(store.db)).rows).toEqual([{ n: 1 }]);
    const { rows } = await sql<{ total: number }>`select count(*) as total from counted`.execute(store.db);
    expect(rows).toEqual([{ total: 2 }]);
  });

  it("keeps no reads of the work queues, which the write after each claim clears", () => {
    const file = new SqliteDatabase(join(testStore.dataDir, "cumulo.sqlite"));
    try {
      const kept = (text: string) => isCacheableRead(text, file.prepare(text));
      expect(kept(`select "name" from "organizations" where "id" = ?`)).toBe(true);
      expect(kept(`select "id" from "webhook_deliveries" where "state" = 'pending' limit ?`)).toBe(false);
      expect(kept(`select "d"."id" from "webhook_deliveries" as "d" where "d"."id" in (?)`)).toBe(false);
      expect(kept(`select "id" from "jobs" where "status" = ?`)).toBe(false);
    } finally {
      file.close();
    }
  });

  it("leaves the kept reads and their generation alone at reads it does not keep, BEGIN and COMMIT", async () => {
    const before = store.generation.current();
    await sql`select random() as r`.execute(store.db);
    // A claim that finds nothing, as the job and webhook workers' polls of an idle server do.
    await store.db
      .transaction()
      .execute((trx) => trx.selectFrom("jobs").select("id").where("status", "=", "pending").execute());
    await store.db.selectFrom("webhook_deliveries").select("id").where("state", "=", "pending").execute();
    expect(store.generation.current()).toBe(before);
    // A write moves it, also one that changes no row; so does a pragma.
    await store.db.updateTable("organizations").set({ name: "x" }).where("id", "=", "none").execute();
    const afterWrite = store.generation.current() ?? 0;
    expect(afterWrite).toBeGreaterThan(before ?? 0);
    await sql`pragma foreign_keys`.execute(store.db);
    expect(store.generation.current()).toBeGreaterThan(afterWrite);
  });

  it("forgets every kept read at a clear, however many it kept, and keeps reads again after it", () => {
    const cache = new SqliteReadCache(() => 1);
    let runs = 0;
    const read = (n: number) =>
      cache.read("select ?", [n], () => {
        runs++;
        return [{ n }];
      });
    for (let n = 0; n < 5000; n++) read(n);
    for (let n = 0; n < 5000; n++) read(n);
    expect(runs).toBe(5000);
    const before = cache.currentGeneration();
    cache.clear();
    expect(cache.currentGeneration()).toBe(before + 1);
    for (let n = 0; n < 5000; n++) expect(read(n)).toEqual([{ n }]);
    expect(runs).toBe(10_000);
    read(1);
    expect(runs).toBe(10_000);
    // A clear with nothing kept still moves the generation.
    cache.clear();
    cache.clear();
    expect(cache.currentGeneration()).toBe(before + 3);
  });
});
