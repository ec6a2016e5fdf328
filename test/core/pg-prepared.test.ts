import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { openStore } from "../../src/store/database.ts";
import { MAX_NAMED_STATEMENTS, preparingPool } from "../../src/store/pg-prepared.ts";
import { createTestStore, type TestStore, testStoreKind } from "../support/store.ts";

describe.runIf(testStoreKind() === "postgres")("named prepared statements on PostgreSQL", () => {
  let store: TestStore;
  let other: pg.Client;
  // One connection, so the statements it holds can be read back from pg_prepared_statements.
  let db: Kysely<Record<string, never>>;

  const namedStatements = async () => {
    const { rows } = await sql<{ statement: string }>`
      select statement from pg_prepared_statements where not from_sql order by statement`.execute(db);
    return rows.map((row) => row.statement);
  };

  beforeAll(async () => {
    store = await createTestStore();
    other = new pg.Client({ connectionString: store.databaseUrl });
    await other.connect();
  });
  afterAll(async () => {
    await other.end();
    await store.drop();
  });
  beforeEach(async () => {
    await other.query("create table items (id int primary key, label text)");
    await other.query("insert into items values (1, 'one')");
    db = new Kysely({
      dialect: new PostgresDialect({
        pool: preparingPool(new pg.Pool({ connectionString: store.databaseUrl, max: 1 })),
      }),
    });
  });
  afterEach(async () => {
    await db.destroy();
    await other.query("drop table items");
  });

  const item = (id: number) => sql<Record<string, unknown>>`select * from items where id = ${id}`.execute(db);

  it("prepares a parameterized text once per connection and runs it by name after", async () => {
    expect((await item(1)).rows).toEqual([{ id: 1, label: "one" }]);
    expect((await item(1)).rows).toEqual([{ id: 1, label: "one" }]);
    expect((await item(2)).rows).toEqual([]);
    expect(await namedStatements()).toEqual(["select * from items where id = $1"]);
  });

  it("answers with the new columns after another connection changed the table", async () => {
    await item(1);
    await other.query("alter table items add column size int not null default 7");
    expect((await item(1)).rows).toEqual([{ id: 1, label: "one", size: 7 }]);
    expect((await item(1)).rows).toEqual([{ id: 1, label: "one", size: 7 }]);
  });

  it("fails a transaction that hit the changed table once, then prepares the text again", async () => {
    await item(1);
    await other.query("alter table items add column size int not null default 7");
    const inTransaction = () =>
      db.transaction().execute((trx) => sql`select * from items where id = ${1}`.execute(trx));
    await expect(inTransaction()).rejects.toMatchObject({ code: "0A000" });
    expect((await inTransaction()).rows).toEqual([{ id: 1, label: "one", size: 7 }]);
  });

  it(`names at most ${MAX_NAMED_STATEMENTS} texts per connection and runs later ones unnamed`, async () => {
    for (let column = 0; column <= MAX_NAMED_STATEMENTS; column += 1) {
      const { rows } = await sql`select ${column}::int as ${sql.ref(`c${column}`)}`.execute(db);
      expect(rows).toEqual([{ [`c${column}`]: column }]);
    }
    expect(await namedStatements()).toHaveLength(MAX_NAMED_STATEMENTS);
  });

  it.each([
    [{}, 1],
    [{ CUMULO_PG_PREPARED_STATEMENTS: "false" }, 0],
  ])("the store runs parameterized queries by name unless told not to (%o)", async (env, named) => {
    const opened = openStore(loadConfig({ ...env, DATABASE_URL: store.databaseUrl }));
    try {
      // One connection for the query and the look at the statements it left on its session.
      const statements = await opened.db.connection().execute(async (connection) => {
        await sql`select * from items where id = ${1}`.execute(connection);
        const { rows } = await sql`select 1 from pg_prepared_statements where not from_sql`.execute(
          connection,
        );
        return rows.length;
      });
      expect(statements).toBe(named);
    } finally {
      await opened.close();
    }
  });
});
