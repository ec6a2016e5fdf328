import { type Kysely, sql, type Transaction } from "kysely";
import type { DialectName } from "../store/database.ts";
import type { Database } from "../store/tables.ts";
import { type Transact, transactor } from "../store/transactions.ts";

/** Kysely's own bookkeeping: a snapshot or reset never touches which migrations ran. */
const isMigrationTable = (name: string) => name.startsWith("kysely_");

/**
 * The store or an organization is reset (or a snapshot loaded) while requests, jobs and webhook
 * deliveries may go on writing, each holding its rows for milliseconds but locking them in its own
 * order. Rather than wait in a cycle until PostgreSQL's deadlock check (a second) ends one side (a
 * writer's request then answered 500), the change gives up a lock it has not had for this long and
 * runs again, all or nothing, up to SWAP_TRIES times.
 */
const SWAP_LOCK_WAIT = "100ms";
const SWAP_TRIES = 20;

/** PostgreSQL keeps each snapshot as a schema of plain copies of the tables. */
export const snapshotSchema = (name: string) => `cumulo_snapshot_${name}`;

const quoted = (identifier: string) => sql.id(identifier);

/** What an organization keeps when reset to its bootstrap state: itself, its users, billing account and keys. */
export const IDENTITY_TABLES = ["organizations", "users", "billing_accounts", "api_keys"];

/**
 * Tables that name their organization neither in an `organization_id` column nor through a foreign
 * key: private addresses are held by a resource's uuid (a VM or a load balancer). Queued jobs carry
 * only ids in their payload and end quietly when their rows are gone.
 */
const ADDRESS_HOLDERS = ["cloud_vms", "cloud_load_balancers"];
export const TABLES_WITHOUT_OWNER = ["jobs", "cloud_private_addresses"];

interface ForeignKey {
  child: string;
  child_column: string;
  parent: string;
  parent_column: string;
}

/**
 * Whole-store operations of developer mode, over every table at once (so a new table needs nothing
 * here): empty it, copy it into a snapshot, and copy a snapshot back.
 */
export class StateRepository {
  readonly #transact: Transact;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
  ) {
    this.#transact = transactor(db, SWAP_TRIES);
  }

  /** Runs a reset or a load as one transaction that gives up a lock it waits for (`SWAP_LOCK_WAIT`). */
  #swap<T>(work: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
    return this.#transact(async (trx) => {
      if (this.dialect === "postgres")
        await sql`set local lock_timeout = ${sql.lit(SWAP_LOCK_WAIT)}`.execute(trx);
      return work(trx);
    });
  }

  /** The application's tables, parents before children (the order rows can be inserted in). */
  async tables(): Promise<string[]> {
    if (this.dialect === "sqlite") {
      const { rows } = await sql<{ name: string }>`
        select name from sqlite_master where type = 'table' and name not like 'sqlite_%' order by name`.execute(
        this.db,
      );
      return rows.map((row) => row.name).filter((name) => !isMigrationTable(name));
    }
    const { rows } = await sql<{ name: string }>`
      select table_name as name from information_schema.tables
      where table_schema = current_schema() and table_type = 'BASE TABLE' order by table_name`.execute(
      this.db,
    );
    const names = rows.map((row) => row.name).filter((name) => !isMigrationTable(name));
    const { rows: edges } = await sql<{ child: string; parent: string }>`
      select child.relname as child, parent.relname as parent
      from pg_constraint c
      join pg_class child on child.oid = c.conrelid
      join pg_class parent on parent.oid = c.confrelid
      where c.contype = 'f' and c.connamespace = current_schema()::regnamespace`.execute(this.db);
    return parentsFirst(names, edges);
  }

  /** Every single-column foreign key between the application's tables. */
  async foreignKeys(executor: Kysely<Database> = this.db): Promise<ForeignKey[]> {
    if (this.dialect === "sqlite") {
      const { rows } = await sql<ForeignKey>`
        select m.name as child, f."from" as child_column, f."table" as parent, f."to" as parent_column
        from sqlite_master m, pragma_foreign_key_list(m.name) f where m.type = 'table'`.execute(executor);
      return rows;
    }
    const { rows } = await sql<ForeignKey>`
      select child.relname as child, ca.attname as child_column, parent.relname as parent, pa.attname as parent_column
      from pg_constraint c
      join pg_class child on child.oid = c.conrelid
      join pg_class parent on parent.oid = c.confrelid
      join pg_attribute ca on ca.attrelid = c.conrelid and ca.attnum = c.conkey[1]
      join pg_attribute pa on pa.attrelid = c.confrelid and pa.attnum = c.confkey[1]
      where c.contype = 'f' and c.connamespace = current_schema()::regnamespace`.execute(executor);
    return rows;
  }

  /** Tables with an `organization_id` column. */
  async organizationTables(executor: Kysely<Database> = this.db): Promise<string[]> {
    const { rows } =
      this.dialect === "sqlite"
        ? await sql<{ name: string }>`
            select m.name as name from sqlite_master m, pragma_table_info(m.name) c
            where m.type = 'table' and c.name = 'organization_id'`.execute(executor)
        : await sql<{ name: string }>`
            select table_name as name from information_schema.columns
            where table_schema = current_schema() and column_name = 'organization_id'`.execute(executor);
    return rows.map((row) => row.name);
  }

  /**
   * Deletes one organization's rows, in one transaction: every row of a table with its
   * `organization_id`, rows of tables that hang off those by a foreign key, and the private
   * addresses of its VMs and load balancers. `keepIdentity` keeps the organization itself, its users,
   * billing account and keys. Before the commit `finish` is given the ids of the libraries it had
   * (their files are to go too), to queue that work with the change; undefined when there is no such
   * organization.
   */
  async emptyOrganization<T>(
    organizationId: string,
    keepIdentity: boolean,
    finish: (trx: Transaction<Database>, libraryIds: string[]) => Promise<T>,
  ): Promise<{ finished: T } | undefined> {
    // Read before the transaction: SQLite's one connection is held by it.
    const owned = new Set(await this.organizationTables());
    const keys = (await this.foreignKeys()).filter((key) => key.child !== key.parent);
    const all = await this.tables();
    return this.#swap(async (trx) => {
      const { rows: found } = await sql<{ id: string }>`
        select id from organizations where id = ${organizationId}`.execute(trx);
      if (found.length === 0) return undefined;
      const { rows: libraries } = await sql<{ id: string }>`
        select id from libraries where organization_id = ${organizationId}`.execute(trx);
      const kept = new Set(keepIdentity ? IDENTITY_TABLES : []);
      const ordered = parentsFirst(all, keys);
      // Its rows are locked parents first (as writers lock an endpoint before its attempts), then
      // deleted children first.
      if (this.dialect === "postgres") {
        for (const table of ordered.filter((name) => owned.has(name) && !IDENTITY_TABLES.includes(name))) {
          await sql`select 1 from ${quoted(table)} where organization_id = ${organizationId} for update`.execute(
            trx,
          );
        }
      }
      for (const holder of ADDRESS_HOLDERS) {
        await sql`delete from cloud_private_addresses where resource_uuid in
          (select uuid from ${quoted(holder)} where organization_id = ${organizationId})`.execute(trx);
      }
      // Children before their parents, so no foreign key is left pointing at a deleted row.
      for (const table of ordered.reverse()) {
        if (kept.has(table)) continue;
        if (table === "organizations") {
          await sql`delete from organizations where id = ${organizationId}`.execute(trx);
        } else if (owned.has(table)) {
          await sql`delete from ${quoted(table)} where organization_id = ${organizationId}`.execute(trx);
        } else {
          for (const key of keys.filter((key) => key.child === table && owned.has(key.parent))) {
            await sql`delete from ${quoted(table)} where ${quoted(key.child_column)} in
              (select ${quoted(key.parent_column)} from ${quoted(key.parent)} where organization_id = ${organizationId})`.execute(
              trx,
            );
          }
        }
      }
      return {
        finished: await finish(
          trx,
          libraries.map((library) => library.id),
        ),
      };
    });
  }

  async migrations(executor: Kysely<Database> = this.db, from?: string): Promise<string[]> {
    const table = from ? sql`${quoted(from)}.kysely_migration` : sql`kysely_migration`;
    const { rows } = await sql<{ name: string }>`select name from ${table} order by name`.execute(executor);
    return rows.map((row) => row.name);
  }

  /**
   * Runs `work` in one transaction, given `deleteAllBut`: it deletes every row of every table but the
   * rows `kept` names by id; the tables it names nothing in count their ids from 1 again, the others
   * after the rows kept. `work` can then write in the same transaction (a reset that keeps the
   * default organization completes it there).
   */
  async empty<T>(
    work: (trx: Transaction<Database>, deleteAllBut: (kept: KeptRows) => Promise<void>) => Promise<T>,
  ): Promise<T> {
    const tables = await this.tables();
    if (this.dialect === "postgres") {
      return this.#swap((trx) =>
        work(trx, async (kept) => {
          const emptied = tables.filter((table) => !(table in kept));
          if (emptied.length > 0) {
            await sql`truncate ${sql.join(emptied.map(quoted))} restart identity`.execute(trx);
          }
          // Children before their parents, so no foreign key is left pointing at a deleted row.
          for (const table of [...tables].reverse()) {
            if (table in kept) await deleteAllRowsBut(trx, table, kept[table] ?? []);
          }
          await continueSequences(trx, tables);
        }),
      );
    }
    return withoutSqliteForeignKeys(this.db, (connection) =>
      connection.transaction().execute((trx) =>
        work(trx, async (kept) => {
          for (const table of tables) await deleteAllRowsBut(trx, table, kept[table] ?? []);
          // AUTOINCREMENT goes on after the largest id left, from 1 in an emptied table.
          await sql`delete from sqlite_sequence`.execute(trx).catch(() => undefined);
        }),
      ),
    );
  }

  /** SQLite: a consistent copy of the whole database in one file (`VACUUM INTO`). */
  async saveSqlite(file: string): Promise<void> {
    await sql`vacuum into ${file}`.execute(this.db);
  }

  /** PostgreSQL: copies every table (and the migration list) into the snapshot's own schema. */
  async savePostgres(name: string): Promise<void> {
    const schema = snapshotSchema(name);
    const tables = [...(await this.tables()), "kysely_migration"];
    await this.db.transaction().execute(async (trx) => {
      await sql`drop schema if exists ${quoted(schema)} cascade`.execute(trx);
      await sql`create schema ${quoted(schema)}`.execute(trx);
      for (const table of tables) {
        await sql`create table ${quoted(schema)}.${quoted(table)} as table ${quoted(table)}`.execute(trx);
      }
    });
  }

  async dropPostgresSnapshot(name: string): Promise<void> {
    await sql`drop schema if exists ${quoted(snapshotSchema(name))} cascade`.execute(this.db);
  }

  async postgresSnapshotExists(name: string): Promise<boolean> {
    const { rows } = await sql<{ found: number }>`
      select 1 as found from information_schema.schemata where schema_name = ${snapshotSchema(name)}`.execute(
      this.db,
    );
    return rows.length > 0;
  }

  /**
   * Replaces every row by the snapshot's, in one transaction. Answers `schema_mismatch` when the
   * snapshot was taken at another set of migrations (its rows would not fit the tables).
   */
  async load(
    source: { sqliteFile: string } | { postgresName: string },
  ): Promise<"loaded" | "schema_mismatch"> {
    const tables = await this.tables();
    const ours = (await this.migrations()).join();
    if ("sqliteFile" in source) {
      return withoutSqliteForeignKeys(this.db, async (connection) => {
        await sql`attach database ${source.sqliteFile} as snapshot`.execute(connection);
        try {
          if ((await this.migrations(connection, "snapshot")).join() !== ours) return "schema_mismatch";
          await connection.transaction().execute(async (trx) => {
            for (const table of tables) await sql`delete from main.${quoted(table)}`.execute(trx);
            for (const table of tables) {
              await sql`insert into main.${quoted(table)} select * from snapshot.${quoted(table)}`.execute(
                trx,
              );
            }
            await sql`delete from main.sqlite_sequence`.execute(trx).catch(() => undefined);
            await sql`insert into main.sqlite_sequence select * from snapshot.sqlite_sequence`
              .execute(trx)
              .catch(() => undefined);
          });
          return "loaded";
        } finally {
          await sql`detach database snapshot`.execute(connection);
        }
      });
    }
    const schema = snapshotSchema(source.postgresName);
    if ((await this.migrations(this.db, schema)).join() !== ours) return "schema_mismatch";
    await this.#swap(async (trx) => {
      await sql`truncate ${sql.join(tables.map(quoted))} cascade`.execute(trx);
      for (const table of tables) {
        await sql`insert into ${quoted(table)} select * from ${quoted(schema)}.${quoted(table)}`.execute(trx);
      }
      await continueSequences(trx, tables);
    });
    return "loaded";
  }
}

/** Rows to keep, by table and `id`: a table named here keeps these (none when empty), every other is emptied. */
export type KeptRows = Partial<Record<string, readonly (string | number)[]>>;

async function deleteAllRowsBut(
  trx: Transaction<Database>,
  table: string,
  ids: readonly (string | number)[],
) {
  if (ids.length === 0) await sql`delete from ${quoted(table)}`.execute(trx);
  else await sql`delete from ${quoted(table)} where id not in (${sql.join(ids)})`.execute(trx);
}

/** PostgreSQL: each serial id of `tables` continues after the largest id the table holds (from 1 when empty). */
async function continueSequences(trx: Transaction<Database>, tables: string[]): Promise<void> {
  const { rows } = await sql<{ table_name: string; column_name: string }>`
    select table_name, column_name from information_schema.columns
    where table_schema = current_schema() and (column_default like 'nextval(%' or is_identity = 'YES')`.execute(
    trx,
  );
  for (const { table_name, column_name } of rows) {
    if (!tables.includes(table_name)) continue;
    await sql`select setval(pg_get_serial_sequence(${table_name}, ${column_name}),
      coalesce((select max(${quoted(column_name)}) from ${quoted(table_name)}), 0) + 1, false)`.execute(trx);
  }
}

/**
 * Runs `work` on SQLite's one connection with foreign keys off: with deferred checks instead, the
 * commit of a whole-table swap failed although `pragma foreign_key_check` found nothing. The connection
 * is held, so no other query runs meanwhile; the rows put back come from a consistent store.
 */
async function withoutSqliteForeignKeys<T>(
  db: Kysely<Database>,
  work: (connection: Kysely<Database>) => Promise<T>,
): Promise<T> {
  return db.connection().execute(async (connection) => {
    await sql`pragma foreign_keys = off`.execute(connection);
    try {
      return await work(connection);
    } finally {
      await sql`pragma foreign_keys = on`.execute(connection);
    }
  });
}

/** Orders tables so that every table comes after those its foreign keys point at. */
function parentsFirst(names: string[], edges: { child: string; parent: string }[]): string[] {
  const ordered: string[] = [];
  const placed = new Set<string>();
  const visit = (name: string, path: Set<string>) => {
    if (placed.has(name) || path.has(name)) return;
    path.add(name);
    for (const edge of edges) if (edge.child === name && edge.parent !== name) visit(edge.parent, path);
    placed.add(name);
    ordered.push(name);
  };
  for (const name of names) visit(name, new Set());
  return ordered;
}
