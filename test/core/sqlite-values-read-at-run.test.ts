import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Store, valuesReadAtRun } from "../../src/store/database.ts";
import { openSqliteTestStore, type SqliteTestStore, testStoreKind } from "../support/store.ts";

const STAMP = "2026-12-07T10:00:00.000Z";

describe("a bound LIMIT or LIKE pattern on SQLite", () => {
  // SQLite plans with a bound LIMIT's value and LIKE pattern, and so prepares such a statement again at every run.
  it("is cast in the SQL text SQLite prepares, so that its value is read at run time", () => {
    expect(valuesReadAtRun('select "id" from "t" order by "id" limit ?')).toBe(
      'select "id" from "t" order by "id" limit cast(? as integer)',
    );
    expect(valuesReadAtRun("select id from t limit ? offset ?")).toBe(
      "select id from t limit cast(? as integer) offset ?",
    );
    expect(
      valuesReadAtRun("select * from (select id from a LIMIT ?) union all select id from b limit ?"),
    ).toBe(
      "select * from (select id from a limit cast(? as integer)) union all select id from b limit cast(? as integer)",
    );
    expect(valuesReadAtRun("select id from t where name = ? limit 1")).toBe(
      "select id from t where name = ? limit 1",
    );
    expect(
      valuesReadAtRun("select id from t where name like ? escape '\\' and note not LIKE ? limit ?"),
    ).toBe(
      "select id from t where name like cast(? as text) escape '\\' and note not like cast(? as text) limit cast(? as integer)",
    );
    expect(valuesReadAtRun("select id from t where name like 'a%'")).toBe(
      "select id from t where name like 'a%'",
    );
  });

  describe.skipIf(testStoreKind() !== "sqlite")("through the store", () => {
    let testStore: SqliteTestStore;
    let store: Store;

    beforeAll(async () => {
      testStore = await openSqliteTestStore();
      store = testStore.store;
      await store.db
        .insertInto("organizations")
        .values(
          [1, 2, 3, 4, 5].map((n) => ({
            id: `00000000-0000-4000-8000-00000000000${n}`,
            name: `organization ${n}`,
            created_at: STAMP,
            updated_at: STAMP,
          })),
        )
        .execute();
    });
    afterAll(async () => {
      await testStore.close();
    });

    const names = (limit: number, offset = 0) =>
      store.db
        .selectFrom("organizations")
        .select("name")
        .orderBy("name")
        .limit(limit)
        .offset(offset)
        .execute()
        .then((rows) => rows.map((row) => row.name));

    it("gives each run the rows its own limit and offset ask for", async () => {
      // One statement, run with other values in turn: a value kept from an earlier run would show.
      expect(await names(2)).toEqual(["organization 1", "organization 2"]);
      expect(await names(0)).toEqual([]);
      expect(await names(10)).toHaveLength(5);
      expect(await names(2, 3)).toEqual(["organization 4", "organization 5"]);
      expect(await names(1, 4)).toEqual(["organization 5"]);
    });

    it("matches each run's own LIKE pattern", async () => {
      const matching = (pattern: string) =>
        store.db
          .selectFrom("organizations")
          .select("name")
          .where("name", "like", pattern)
          .orderBy("name")
          .execute()
          .then((rows) => rows.map((row) => row.name));
      expect(await matching("%3")).toEqual(["organization 3"]);
      expect(await matching("%4%")).toEqual(["organization 4"]);
      expect(await matching("organization %")).toHaveLength(5);
      expect(await matching("nothing%")).toEqual([]);
    });

    it("limits each part of a union by its own value", async () => {
      const part = (from: number, limit: number) =>
        store.db
          .selectFrom(
            store.db
              .selectFrom("organizations")
              .select("name")
              .where("name", ">=", `organization ${from}`)
              .orderBy("name")
              .limit(limit)
              .as(`from${from}`),
          )
          .selectAll();
      const union = (first: number, second: number) =>
        part(1, first)
          .unionAll(part(4, second))
          .execute()
          .then((rows) => rows.map((row) => row.name));
      expect(await union(1, 2)).toEqual(["organization 1", "organization 4", "organization 5"]);
      expect(await union(3, 0)).toEqual(["organization 1", "organization 2", "organization 3"]);
    });
  });
});
