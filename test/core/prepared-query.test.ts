import { type Generated, type Insertable, type Kysely, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/store/database.ts";
import { columnsOf, PreparedQuery, type ValueOf, valuesOf } from "../../src/store/prepared.ts";
import { createTestStore, type TestStore } from "../support/store.ts";

interface ThingsTable {
  id: number;
  name: string;
  flag: Generated<boolean>;
  note: string | null;
}
interface ThingsDatabase {
  prepared_things: ThingsTable;
}
interface Thing {
  id: number;
  name: string;
  flag?: boolean | undefined;
  note?: string | null | undefined;
}

/** Queries built and compiled once, then run with each call's values (src/store/prepared.ts). */
describe("prepared queries", () => {
  let testStore: TestStore;
  let store: Store;
  let db: Kysely<ThingsDatabase>;

  beforeAll(async () => {
    testStore = await createTestStore();
    store = openStore({ dataDir: testStore.dataDir, databaseUrl: testStore.databaseUrl });
    db = store.db as unknown as Kysely<ThingsDatabase>;
    await sql`create table prepared_things (id integer primary key, name text not null, flag boolean not null default false, note text)`.execute(
      db,
    );
  });
  afterAll(async () => {
    await store.close();
    await testStore.drop();
  });

  it("inserts and updates with each run's values, compiling once per set of columns", async () => {
    const shapes: string[] = [];
    const insert = new PreparedQuery<Thing, { id: number }>(
      (value: ValueOf<Thing>, row) => {
        shapes.push(columnsOf(row).join());
        return db
          .insertInto("prepared_things")
          .values(valuesOf(value, row, (values) => values) as Insertable<ThingsTable>)
          .returning("id");
      },
      (row) => columnsOf(row).join(),
    );
    const rename = new PreparedQuery<{ id: number; changes: Partial<Thing> }, { name: string }>(
      (value: ValueOf<{ id: number; changes: Partial<Thing> }>, { changes }) =>
        db
          .updateTable("prepared_things")
          .set(valuesOf(value, changes, (values) => values.changes))
          .where(
            "id",
            "=",
            value((values) => values.id),
          )
          .returning("name"),
      ({ changes }) => columnsOf(changes).join(),
    );

    await insert.execute(store.db, { id: 1, name: "one", flag: true });
    await insert.execute(store.db, { id: 2, name: "two", flag: false });
    // An undefined column is left out, as Kysely leaves it out: another shape, the column's default.
    await insert.execute(store.db, { id: 3, name: "three", flag: undefined, note: "n" });
    expect(shapes).toEqual(["id,name,flag", "id,name,note"]);

    expect((await rename.execute(store.db, { id: 2, changes: { name: "deux" } })).rows).toEqual([
      { name: "deux" },
    ]);
    expect((await rename.execute(store.db, { id: 3, changes: { name: "trois", note: null } })).rows).toEqual([
      { name: "trois" },
    ]);
    expect((await rename.execute(store.db, { id: 9, changes: { name: "none" } })).rows).toEqual([]);

    const rows = await db.selectFrom("prepared_things").selectAll().orderBy("id").execute();
    expect(rows.map((row) => ({ ...row, flag: Boolean(row.flag) }))).toEqual([
      { id: 1, name: "one", flag: true, note: null },
      { id: 2, name: "deux", flag: false, note: null },
      { id: 3, name: "trois", flag: false, note: null },
    ]);
  });
});
