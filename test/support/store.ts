import { randomBytes } from "node:crypto";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import SqliteDatabase from "better-sqlite3";
import { type Kysely, sql } from "kysely";
import pg from "pg";
import { openStore, type Store } from "../../src/store/database.ts";
import type { Database } from "../../src/store/tables.ts";
import { waitUntil } from "./wait.ts";

export type TestStoreKind = "sqlite" | "postgres";

/** The store file's name in a SQLite data dir (src/store/database.ts). */
export const SQLITE_FILE = "cumulo.sqlite";

/** Which store this test process runs against; vitest runs the suite once per store (vitest.config.ts). */
export const testStoreKind = (): TestStoreKind =>
  process.env.CUMULO_TEST_STORE === "postgres" ? "postgres" : "sqlite";

/**
 * A store migrated once for a whole test run (test/support/store-template.ts): on SQLite a store
 * file, on PostgreSQL a database to name as `TEMPLATE`.
 */
export interface StoreTemplate {
  kind: TestStoreKind;
  /** The SQLite file's path, or the PostgreSQL database's name. */
  source: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    storeTemplate: StoreTemplate | undefined;
  }
}

export interface TestStore {
  kind: TestStoreKind;
  dataDir: string;
  databaseUrl: string | undefined;
  /** Redis key and channel prefix of its own, so test files sharing one Redis never hear each other. */
  redisPrefix: string;
  drop(): Promise<void>;
}

function adminUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error("CUMULO_TEST_STORE=postgres needs TEST_DATABASE_URL");
  return url;
}

/** The admin connection's URL with another database. */
export function testDatabaseUrl(name: string): string {
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

/** Runs statements on the admin database (CREATE and DROP DATABASE cannot run in the database itself). */
export async function onAdminDatabase(...statements: string[]): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  try {
    for (const statement of statements) await admin.query(statement);
  } finally {
    await admin.end();
  }
}

/** The PostgreSQL database a test store names. */
export const databaseOf = (store: Pick<TestStore, "databaseUrl">): string =>
  new URL(store.databaseUrl ?? "").pathname.slice(1);

/** Ends every connection to `database`, as a restart or a failover of the server would. */
export const endConnections = (database: string): Promise<void> =>
  onAdminDatabase(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${database}'`);

/** The template this vitest project's global set-up migrated, when it is of `kind` (none outside vitest). */
async function templateOf(kind: TestStoreKind): Promise<string | undefined> {
  if (!process.env.VITEST) return undefined;
  const { inject } = await import("vitest");
  const template = inject("storeTemplate");
  return template?.kind === kind ? template.source : undefined;
}

/** A data dir of its own and, on PostgreSQL, a database of its own, empty, dropped afterwards. */
export const createTestStore = (kind: TestStoreKind = testStoreKind()) => createStore(kind, undefined);

/**
 * As `createTestStore`, but a copy of the run's migrated template when there is one (migrating each
 * test app's store from nothing took about a second on PostgreSQL): for a caller that migrates the
 * store anyway, as every start of Cumulo does, and is not testing the migrations.
 */
export const createMigratedTestStore = async (kind: TestStoreKind = testStoreKind()) =>
  createStore(kind, await templateOf(kind));

/** A SQLite store of its own, opened and migrated as Cumulo opens it; `close` closes it and removes its data dir. */
export interface SqliteTestStore {
  store: Store;
  dataDir: string;
  close(): Promise<void>;
}

export async function openSqliteTestStore(): Promise<SqliteTestStore> {
  const testStore = await createTestStore("sqlite");
  const store = openStore({ dataDir: testStore.dataDir, databaseUrl: undefined });
  await store.migrate();
  return {
    store,
    dataDir: testStore.dataDir,
    async close() {
      await store.close();
      await testStore.drop();
    },
  };
}

async function createStore(kind: TestStoreKind, template: string | undefined): Promise<TestStore> {
  const dataDir = mkdtempSync(join(tmpdir(), "cumulo-test-"));
  const redisPrefix = `cumulo-test-${randomBytes(6).toString("hex")}:`;
  if (kind === "sqlite") {
    if (template) copyFileSync(template, join(dataDir, SQLITE_FILE));
    return {
      kind,
      dataDir,
      databaseUrl: undefined,
      redisPrefix,
      drop: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const name = `cumulo_test_${randomBytes(6).toString("hex")}`;
  await onAdminDatabase(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ""}`);
  return {
    kind,
    dataDir,
    databaseUrl: testDatabaseUrl(name),
    redisPrefix,
    async drop() {
      await onAdminDatabase(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A second connection to a SQLite store, holding its write lock as another process (the CLI, a second node) would. */
export async function lockedFromAnotherConnection(
  dataDir: string,
  { foreignKeys = false } = {},
): Promise<SqliteDatabase.Database> {
  const other = new SqliteDatabase(join(dataDir, SQLITE_FILE), { timeout: 0 });
  if (foreignKeys) other.pragma("foreign_keys = ON");
  await takeWriteLock(other);
  return other;
}

/**
 * Begins a write transaction on `connection` (opened with `timeout: 0`), trying again on a timer
 * while the lock is busy, between the node's own writes. SQLite's busy wait would hold this
 * process's event loop, and with it the node's commit of the group of writes that holds the lock
 * (src/store/sqlite-group-commit.ts), for the whole busy timeout.
 */
export async function takeWriteLock(connection: SqliteDatabase.Database): Promise<void> {
  await waitUntil(
    () => {
      try {
        connection.exec("begin immediate");
        return true;
      } catch (error) {
        if ((error as { code?: string }).code !== "SQLITE_BUSY") throw error;
        return false;
      }
    },
    5000,
    "the write lock",
  );
}

/** Runs `write` on a second connection to a SQLite store and commits it: another process's write. */
export async function writeFromAnotherConnection(
  dataDir: string,
  write: (other: SqliteDatabase.Database) => void,
): Promise<void> {
  const other = await lockedFromAnotherConnection(dataDir);
  try {
    write(other);
    other.exec("commit");
  } finally {
    if (other.inTransaction) other.exec("rollback");
    other.close();
  }
}

/**
 * Runs `work` while a SQLite store has room for no new page: SQLite answers a write that needs one
 * as on a full disk ("database or disk is full"), and rolls its transaction back.
 */
export async function withNoRoomForNewPages(db: Kysely<Database>, work: () => Promise<void>): Promise<void> {
  const pragma = async (text: string) =>
    Object.values((await sql.raw<Record<string, number>>(`pragma ${text}`).execute(db)).rows[0] ?? {})[0];
  const limit = await pragma("max_page_count");
  await pragma(`max_page_count = ${await pragma("page_count")}`);
  try {
    await work();
  } finally {
    await pragma(`max_page_count = ${limit}`);
  }
}
