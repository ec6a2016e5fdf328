import { accessSync, constants } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import SqliteDatabase from "better-sqlite3";
import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  type KyselyConfig,
  type KyselyPlugin,
  type MigrationResultSet,
  Migrator,
  OperationNodeTransformer,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  PostgresDialect,
  type PrimitiveValueListNode,
  type QueryResult,
  type RootOperationNode,
  SqliteDialect,
  type SqliteDialectConfig,
  type SqliteDatabase as SqliteDialectDatabase,
  SqliteDriver,
  type SqliteStatement,
  sql,
  type UnknownRow,
  type ValueNode,
} from "kysely";
import { LRUCache } from "lru-cache";
import pg from "pg";
import { diskCannotWrite, makeDirectories } from "../directories.ts";
import { allMigrations } from "./migrations/index.ts";
import { PgChangeGeneration, trackingWrites } from "./pg-change-generation.ts";
import { type ListenHandlers, PgListener } from "./pg-listener.ts";
import { PG_CONNECT_TIMEOUT_MS } from "./pg-pool.ts";
import { preparingPool } from "./pg-prepared.ts";
import { PgStallWatchdog } from "./pg-stall-watchdog.ts";
import { FALLBACK_CHECKPOINT_PAGES, SqliteCheckpointer } from "./sqlite-checkpointer.ts";
import { SqliteFileGuard } from "./sqlite-file-guard.ts";
import { SqliteGroupCommit } from "./sqlite-group-commit.ts";
import { changesNothing, isCacheableRead, SqliteReadCache } from "./sqlite-read-cache.ts";
import type { Database } from "./tables.ts";
import { isStoreUnavailable } from "./unavailable.ts";

export type DialectName = "sqlite" | "postgres";

export interface Store {
  db: Kysely<Database>;
  dialect: DialectName;
  /**
   * SQLite only: a number that changes whenever another connection (another process, such as the
   * CLI) commits to the database; this process's own commits leave it alone. Read synchronously.
   */
  externalChanges?: () => number;
  /** What kept answers are checked against (src/http/response-cache.ts). */
  generation: StoreGeneration;
  /**
   * `generation`, moved also by every change to the traffic rollups, which PostgreSQL's `generation`
   * leaves out: what kept analytics buckets are checked against (src/cdn/analytics.ts). Started with it.
   */
  generationWithTraffic: StoreGeneration;
  /** PostgreSQL's connection pool, for its metrics; SQLite has one connection and no pool. */
  pool?: { totalCount: number; idleCount: number; waitingCount: number };
  /**
   * PostgreSQL only: LISTENs on `channel` on a connection of its own (reconnected when lost) until the
   * store closes. Resolves after the first attempt.
   */
  listen?: (channel: string, handlers: ListenHandlers) => Promise<PgListener>;
  /**
   * Applies the migrations not yet applied. SQLite: `onWaiting` is told once if another process has
   * held the write lock past the busy timeout (migrating, most likely); this one waits on.
   */
  /** Applies the migrations the store lacks; resolves to their names (none: already up to date). */
  migrate(onWaiting?: () => void): Promise<string[]>;
  ping(): Promise<boolean>;
  /**
   * Whether the store answers and takes writes, in one query: a PostgreSQL standby (in recovery), or a
   * database or role set `default_transaction_read_only`, answers but refuses every write. Calls made
   * while one query is under way share its answer.
   */
  readiness(): Promise<StoreReadiness>;
  close(): Promise<void>;
}

export type StoreReadiness = "ready" | "read_only" | "disk_full" | "store_replaced" | "unavailable";

/**
 * A number that changes whenever anything stored may have changed, by this process or another:
 * SQLite's `SqliteReadCache.currentGeneration`, PostgreSQL's `PgChangeGeneration`.
 */
export interface StoreGeneration {
  /** Read synchronously; undefined while changes cannot be known (PostgreSQL, before listening or after losing it). */
  current(): number | undefined;
  /** Resolves once every commit made before the call has moved `current` (PostgreSQL: other processes' commits). */
  caughtUp?(): Promise<void>;
  /** Starts following other processes' changes, where that needs a connection of its own; `onLost` hears when it drops. */
  start?(onLost: (error?: unknown) => void, onHeard?: () => void): Promise<void>;
}

export interface StoreOptions {
  dataDir: string;
  databaseUrl: string | undefined;
  /** Told each query's duration and whether it failed (metrics). */
  onQuery?: (milliseconds: number, failed: boolean) => void;
  /** PostgreSQL: run parameterized queries as named prepared statements (default true; src/store/pg-prepared.ts). */
  pgPreparedStatements?: boolean;
  /** PostgreSQL: how long a new connection may take to be ready (CUMULO_PG_CONNECT_TIMEOUT_MS, default 10 s). */
  pgConnectTimeoutMs?: number;
  /** SQLite: told once if the store file is removed or replaced while it is open (`SqliteFileGuard`). */
  onFileReplaced?: (path: string) => void;
}

/** Kysely's query log as a timing hook: Kysely measures each query only when a log is set. */
const queryLog = (onQuery: StoreOptions["onQuery"]): Pick<KyselyConfig, "log"> =>
  onQuery ? { log: (event) => onQuery(event.queryDurationMillis, event.level === "error") } : {};

const toSqliteValue = (value: unknown): unknown => (typeof value === "boolean" ? (value ? 1 : 0) : value);

/** better-sqlite3 cannot bind booleans; SQLite keeps them as 0/1. */
const bindable = (parameters: ReadonlyArray<unknown>): ReadonlyArray<unknown> =>
  parameters.some((value) => typeof value === "boolean") ? parameters.map(toSqliteValue) : parameters;

/**
 * The same conversion for the schema builders' literal defaults (`defaultTo(false)`), which are part
 * of the SQL text rather than parameters. Only migrations use it: rewriting every query's operation
 * tree cost several percent of a read, so queries convert their parameters as they are bound.
 */
class SqliteBooleanTransformer extends OperationNodeTransformer {
  protected override transformValue(node: ValueNode): ValueNode {
    return { ...super.transformValue(node), value: toSqliteValue(node.value) };
  }

  protected override transformPrimitiveValueList(node: PrimitiveValueListNode): PrimitiveValueListNode {
    return { ...super.transformPrimitiveValueList(node), values: node.values.map(toSqliteValue) };
  }
}

class SqliteBooleanPlugin implements KyselyPlugin {
  readonly #transformer = new SqliteBooleanTransformer();

  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    return this.#transformer.transformNode(args.node);
  }

  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result;
  }
}

// Both stores read back the same JS values: timestamps as ISO strings, JSON as text, counts as numbers.
const PG_TIMESTAMPTZ = 1184;
const PG_INT8 = 20;
const PG_NUMERIC = 1700;
const PG_JSON = 114;
const PG_JSONB = 3802;

const pgTypes = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    switch (oid) {
      case PG_TIMESTAMPTZ:
        return (value: string) => new Date(value).toISOString();
      case PG_INT8:
      case PG_NUMERIC:
        return (value: string) => Number(value);
      case PG_JSON:
      case PG_JSONB:
        return (value: string) => value;
      default:
        return pg.types.getTypeParser(oid, format);
    }
  },
};

/**
 * SQLite reads the values bound to a LIMIT (since a change of 2024) and to a LIKE pattern as it prepares
 * a statement, to plan with them, and so prepares the statement again at every run, each run binding
 * them anew: a simple page read took twice its time (docs/performance.md, session 55). Cast, they are
 * read when the statement runs. The text is rewritten once, when the statement cache prepares it.
 */
const PLANNED_WITH_VALUE = /\b(limit|like) \?/gi;
export const valuesReadAtRun = (text: string): string =>
  text.replace(PLANNED_WITH_VALUE, (_match, word: string) =>
    word.toLowerCase() === "limit" ? "limit cast(? as integer)" : "like cast(? as text)",
  );

/**
 * Kysely prepares every query it runs; compiling the same SQL on each request was the largest cost
 * of a read on SQLite (docs/performance.md). Prepared statements are reused by SQL text instead:
 * Kysely's SQLite driver runs one query at a time on its one connection, so a statement is never
 * used twice at once, and SQLite re-prepares a statement by itself after a schema change. Booleans
 * are bound as 0/1 here. Read-only statements answer from `reads` while nothing has changed; every
 * statement that may change something clears it before it runs.
 */
function withStatementCache(file: SqliteDatabase.Database, reads: SqliteReadCache): SqliteDialectDatabase {
  const statements = new LRUCache<string, SqliteStatement>({ max: 1000 });
  const prepare = (text: string): SqliteStatement => {
    const statement = file.prepare(valuesReadAtRun(text));
    // Only a statement that may change something clears the kept reads, and with them moves the
    // generation kept answers are checked against: not the reads left unkept (the queues' scans, reads
    // of the clock), nor BEGIN or COMMIT.
    const clear = changesNothing(text, statement) ? () => {} : () => reads.clear();
    return {
      reader: statement.reader,
      all: isCacheableRead(text, statement)
        ? (parameters) =>
            reads.read(text, parameters, () => statement.all(bindable(parameters)) as UnknownRow[])
        : (parameters) => {
            clear();
            return statement.all(bindable(parameters));
          },
      run: (parameters) => {
        clear();
        return statement.run(bindable(parameters));
      },
      iterate: (parameters) => {
        clear();
        return statement.iterate(bindable(parameters));
      },
    };
  };
  return {
    prepare(text) {
      let statement = statements.get(text);
      if (!statement) {
        statement = prepare(text);
        statements.set(text, statement);
      }
      return statement;
    },
    close() {
      statements.clear();
      reads.clear();
      file.close();
    },
  };
}

/**
 * Every SQLite transaction takes the write lock as it begins (`begin immediate`, waiting for another
 * process's as long as `busy_timeout`) instead of at its first write. A transaction that read first
 * and then wrote failed at once with "database is locked" when another process (a second node, the
 * CLI) had committed in between, its snapshot being stale: SQLite does not wait in that case.
 * Writes that meet at the connection share one commit (`SqliteGroupCommit`).
 */
class WriteLockingSqliteDialect extends SqliteDialect {
  readonly #config: SqliteDialectConfig;
  readonly #inTransaction: () => boolean;
  readonly #forgetReads: () => void;

  constructor(config: SqliteDialectConfig, inTransaction: () => boolean, forgetReads: () => void) {
    super(config);
    this.#config = config;
    this.#inTransaction = inTransaction;
    this.#forgetReads = forgetReads;
  }

  override createDriver(): Driver {
    return new WriteLockingSqliteDriver(this.#config, this.#inTransaction, this.#forgetReads);
  }
}

class WriteLockingSqliteDriver extends SqliteDriver {
  readonly #inTransaction: () => boolean;
  readonly #forgetReads: () => void;
  #connection: DatabaseConnection | undefined;
  #groups: SqliteGroupCommit | undefined;
  /** Leases asked for and not yet given. */
  #waiting = 0;

  constructor(config: SqliteDialectConfig, inTransaction: () => boolean, forgetReads: () => void) {
    super(config);
    this.#inTransaction = inTransaction;
    this.#forgetReads = forgetReads;
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    this.#waiting++;
    let connection: DatabaseConnection;
    try {
      // SQLite has one connection: the same one is handed out each time.
      connection = await super.acquireConnection();
    } finally {
      this.#waiting--;
    }
    if (!this.#connection) {
      const groups = new SqliteGroupCommit(
        connection,
        this.#inTransaction,
        () => this.#waiting > 0,
        () => void this.#commitWhenFree(),
        this.#forgetReads,
      );
      this.#groups = groups;
      this.#connection = waitingForWriteLock(groups.grouping, this.#inTransaction, {
        release: () => super.releaseConnection(),
        reacquire: async () => {
          await super.acquireConnection();
        },
      });
    }
    return this.#connection;
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw("begin immediate"));
  }

  /**
   * SQLite rolls a transaction back by itself after some errors (a full disk, an I/O error); a
   * second rollback would fail ("no transaction is active") and that error would replace the one
   * that says what happened.
   */
  override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    if (this.#inTransaction()) await super.rollbackTransaction(connection);
  }

  /** The connection is given back first: a lease waiting for its group's commit lets the others join it. */
  override async releaseConnection(): Promise<void> {
    const committed = this.#groups?.endLease();
    await super.releaseConnection();
    if (committed) await committed;
  }

  async #commitWhenFree(): Promise<void> {
    await super.acquireConnection();
    try {
      this.#groups?.commitOpen();
    } finally {
      await super.releaseConnection();
    }
  }

  override async destroy(): Promise<void> {
    this.#groups?.close();
    await super.destroy();
  }
}

/**
 * `read`'s value, read at most once per callback Node makes into JavaScript (an I/O or timer event,
 * with the ticks and promise jobs that follow it): the memo is forgotten before the next one.
 * Everything answered in one such callback was received before it began, so the state seen when it
 * first asked is one each of those requests could have been answered from.
 *
 * Node runs queued ticks before promise jobs, so a tick queued at once would forget the value before
 * the request's own promise jobs (its async hooks, the route) could share it. Queued by a promise
 * job, it runs once no promise job is left, and still before the next callback.
 */
function oncePerCallback(read: () => number): () => number {
  let value: number | undefined;
  const forget = () => {
    value = undefined;
  };
  const forgetAfterPromiseJobs = () => process.nextTick(forget);
  // A settled promise's `then` queues a bare promise job; `queueMicrotask` would also make an async resource.
  const settled = Promise.resolve();
  return () => {
    if (value === undefined) {
      value = read();
      void settled.then(forgetAfterPromiseJobs);
    }
    return value;
  };
}

const SQLITE_BUSY_TIMEOUT_MS = 5000;
/** The longest sleep between two tries for the write lock (SQLite's own busy handler sleeps up to 100 ms). */
const LOCK_RETRY_MAX_MS = 25;

const isSqliteBusy = (error: unknown): boolean =>
  String((error as { code?: unknown }).code).startsWith("SQLITE_BUSY");

/**
 * A statement that finds another process (a second node, the CLI, a migration) holding the write lock
 * is tried again after a sleep on a timer, for as long as `SQLITE_BUSY_TIMEOUT_MS`, then fails as
 * before (answered 503). SQLite's own busy timeout sleeps inside the statement, which held the whole
 * event loop: probes, metrics, the edge's kept answers and uploads stopped for up to 5 s. Only
 * statements outside a transaction wait so, `begin immediate` among them: inside one, the write lock
 * is already ours. While it sleeps, the statement gives the one connection back (`handOver`): kept,
 * every other query of the node (reads, metrics, `/readyz`) queued behind the waiting write, for
 * 14-35 s with a few writes waiting (QA of session 48).
 */
function waitingForWriteLock(
  connection: DatabaseConnection,
  inTransaction: () => boolean,
  handOver: { release: () => Promise<void>; reacquire: () => Promise<void> },
): DatabaseConnection {
  const tryAgain = async <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
    const giveUpAt = Date.now() + SQLITE_BUSY_TIMEOUT_MS;
    for (let attempt = 0; ; attempt++) {
      await handOver.release();
      await sleep(Math.min(2 ** attempt, LOCK_RETRY_MAX_MS));
      await handOver.reacquire();
      try {
        return await connection.executeQuery<R>(query);
      } catch (error) {
        if (!isSqliteBusy(error) || Date.now() >= giveUpAt) throw error;
      }
    }
  };
  return {
    // Kysely's SQLite connection throws at once rather than rejecting: the usual path adds no promise.
    executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
      try {
        return connection.executeQuery<R>(query);
      } catch (error) {
        if (!isSqliteBusy(error) || inTransaction()) throw error;
        return tryAgain<R>(query);
      }
    },
    streamQuery: (query, chunkSize) => connection.streamQuery(query, chunkSize),
  };
}

/**
 * SQLite opens a file it may not write read-only without a word: a node then said it was ready and
 * answered every write with 500. Refused here instead, naming the file or directory (files absent are
 * made later).
 */
function assertWritable(paths: string[]): void {
  for (const path of paths) {
    try {
      accessSync(path, constants.W_OK);
    } catch (error) {
      const { code } = error as NodeJS.ErrnoException;
      if (code === "ENOENT") continue;
      throw new Error(
        `${path} cannot be written by this process (${code}): give the node's user the data dir's files (chown -R), or make its file system writable`,
      );
    }
  }
}

function openSqlite(
  dataDir: string,
  { onQuery, onFileReplaced = () => {} }: Pick<StoreOptions, "onQuery" | "onFileReplaced">,
): {
  db: Kysely<Database>;
  externalChanges: () => number;
  generation: StoreGeneration;
  generationWithTraffic: StoreGeneration;
  checkpointer: SqliteCheckpointer;
  inTransaction: () => boolean;
  fileGuard: SqliteFileGuard;
} {
  makeDirectories(dataDir);
  const path = join(dataDir, "cumulo.sqlite");
  // The directory too: SQLite makes the file and its -wal and -shm there ("unable to open database file").
  assertWritable([dataDir, path, `${path}-wal`, `${path}-shm`]);
  const file = new SqliteDatabase(path);
  // First: switching a fresh file to WAL waits for another process opening it at the same moment.
  file.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
  file.pragma("journal_mode = WAL");
  file.pragma("foreign_keys = ON");
  file.pragma("synchronous = NORMAL");
  // A transaction's undo pages spill to a temporary file past 64 KiB. Kept in memory they made the
  // webhook engine's small groups 5-7% cheaper, but a library's or an organization's deletion then held
  // its whole undo record in the process: 630 MB for a million videos (docs/performance.md, session 56).
  file.pragma("temp_store = FILE");
  // From here on, a statement waiting for the write lock sleeps on a timer (`waitingForWriteLock`).
  file.pragma("busy_timeout = 0");
  // Checkpoints run on a worker thread; this connection makes one only if that falls far behind.
  file.pragma(`wal_autocheckpoint = ${FALLBACK_CHECKPOINT_PAGES}`);
  const checkpointer = new SqliteCheckpointer(path);
  const fileGuard = new SqliteFileGuard(path, file, onFileReplaced);
  // `data_version` moves only on other connections' commits: one statement step (a few µs), no query
  // building, asked by the key check, the read cache and the response cache of each request.
  const dataVersion = file.prepare("PRAGMA data_version").pluck();
  const externalChanges = oncePerCallback(() => dataVersion.get() as number);
  const reads = new SqliteReadCache(externalChanges);
  const inTransaction = () => file.inTransaction;
  const db = new Kysely<Database>({
    dialect: new WriteLockingSqliteDialect({ database: withStatementCache(file, reads) }, inTransaction, () =>
      reads.clear(),
    ),
    ...queryLog(onQuery),
  });
  const generation = { current: () => reads.currentGeneration() };
  // It moves with every commit to any table, the traffic rollups' included.
  return {
    db,
    externalChanges,
    generation,
    generationWithTraffic: generation,
    checkpointer,
    inTransaction,
    fileGuard,
  };
}

/**
 * `begin immediate`, tried again until it takes the write lock: a large migration by another process
 * may hold it past the busy timeout, after which `onWaiting` is told once.
 */
async function beginWaiting(connection: Kysely<Database>, onWaiting: () => void): Promise<void> {
  for (let told = false; ; told = true) {
    try {
      await sql`begin immediate`.execute(connection);
      return;
    } catch (error) {
      if (!isSqliteBusy(error)) throw error;
    }
    if (!told) onWaiting();
  }
}

/**
 * Migrates in one transaction holding SQLite's write lock. Kysely's SQLite adapter takes no migration
 * lock and runs each statement on its own, so two processes starting on a fresh file both found
 * nothing applied and one failed ("table already exists"), and a crash midway left tables whose
 * migration was not recorded. Now a second process waits for the lock, then reads the migrations the
 * first applied; a failure or a crash rolls the whole run back.
 */
function migrateHoldingWriteLock(
  db: Kysely<Database>,
  inTransaction: () => boolean,
  migrator: (db: Kysely<Database>) => Migrator,
  onWaiting: () => void,
): Promise<MigrationResultSet> {
  // One connection all along: every statement of the run is part of the transaction begun here.
  return db.connection().execute(async (connection) => {
    // It returns its failures rather than throwing them.
    const migrate = () => migrator(connection).migrateToLatest();
    // Most starts find nothing to apply: they take no lock, which a running node's writes would wait
    // for. Migrating then only reads, and still refuses a store with migrations this version lacks.
    if ((await migrator(connection).getMigrations()).every((migration) => migration.executedAt)) {
      return migrate();
    }
    await beginWaiting(connection, onWaiting);
    let outcome: MigrationResultSet | undefined;
    try {
      outcome = await migrate();
    } finally {
      // SQLite may have rolled back by itself (a full disk): a second rollback would hide why.
      if (inTransaction())
        await sql.raw(outcome && !outcome.error ? "commit" : "rollback").execute(connection);
    }
    return outcome;
  });
}

function openPostgres(
  databaseUrl: string,
  { onQuery, pgPreparedStatements = true, pgConnectTimeoutMs = PG_CONNECT_TIMEOUT_MS }: StoreOptions,
  listen: NonNullable<Store["listen"]>,
  watchdog: PgStallWatchdog,
): {
  db: Kysely<Database>;
  pool: pg.Pool;
  generation: PgChangeGeneration;
  generationWithTraffic: StoreGeneration;
} {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: 10,
    types: pgTypes,
    connectionTimeoutMillis: pgConnectTimeoutMs,
  });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on("error", () => {});
  // Nor may one in use: a connection lost mid-query (PostgreSQL restarting) emits `error` on its
  // client, which pg-pool only listens for while the client is idle. The query fails with the same
  // error (answered 503), and the pool drops the client when it is given back.
  pool.on("connect", (client) => {
    client.on("error", () => {});
    watchdog.watch(client);
  });
  const generation = new PgChangeGeneration(listen);
  const tracked = trackingWrites(pgPreparedStatements ? preparingPool(pool) : pool, () => generation.moved());
  const dialect = new PostgresDialect({ pool: tracked });
  const db = new Kysely<Database>({ dialect, ...queryLog(onQuery) });
  return { db, pool, generation, generationWithTraffic: generation.withTraffic };
}

/** Migrations the store has run that this version does not have (a newer version ran them). */
async function unknownMigrations(db: Kysely<Database>, dialect: DialectName): Promise<string[]> {
  const known = allMigrations(dialect);
  const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);
  return rows.map((row) => row.name).filter((name) => !(name in known));
}

export function openStore(options: StoreOptions): Store {
  const dialect: DialectName = options.databaseUrl ? "postgres" : "sqlite";
  const { databaseUrl } = options;
  const listeners: PgListener[] = [];
  // A server that stops answering altogether fails the queries waiting on it instead of holding them.
  const connectTimeoutMs = options.pgConnectTimeoutMs ?? PG_CONNECT_TIMEOUT_MS;
  const watchdog = databaseUrl ? new PgStallWatchdog(databaseUrl, connectTimeoutMs) : undefined;
  const listen: Store["listen"] = databaseUrl
    ? (channel, handlers) => {
        const listener = new PgListener(databaseUrl, channel, handlers, connectTimeoutMs, watchdog);
        listeners.push(listener);
        return listener.start().then(() => listener);
      }
    : undefined;
  const {
    db,
    externalChanges,
    generation,
    generationWithTraffic,
    pool,
    checkpointer,
    inTransaction,
    fileGuard,
  } =
    databaseUrl && listen && watchdog
      ? {
          ...openPostgres(databaseUrl, options, listen, watchdog),
          externalChanges: undefined,
          checkpointer: undefined,
          inTransaction: undefined,
          fileGuard: undefined,
        }
      : { ...openSqlite(options.dataDir, options), pool: undefined };
  const askReadiness = async (): Promise<StoreReadiness> => {
    try {
      // SQLite: a store file the node cannot write stops start-up (openSqlite); a disk that fills
      // (or turns read-only) while it runs has every write answered 503.
      if (dialect === "sqlite") {
        if (fileGuard?.replaced()) return "store_replaced";
        await sql`select 1`.execute(db);
        return (await diskCannotWrite(options.dataDir)) ? "disk_full" : "ready";
      }
      // On in every transaction of a standby, as under `default_transaction_read_only`.
      const { rows } = await sql<{ read_only: string }>`
        select current_setting('transaction_read_only') as read_only`.execute(db);
      return rows[0]?.read_only === "on" ? "read_only" : "ready";
    } catch {
      return "unavailable";
    }
  };
  // Probes that arrive while a check is under way share its answer: a flood of unauthenticated
  // /readyz holds one store connection, not the pool. No answer is kept once given, so a store that
  // stops answering is seen by the next probe (docs/decisions.md, Readiness shared).
  let readinessInFlight: Promise<StoreReadiness> | undefined;
  return {
    db,
    dialect,
    externalChanges,
    generation,
    generationWithTraffic,
    pool,
    listen,
    async migrate(onWaiting = () => {}) {
      const migrator = (migrating: Kysely<Database>) =>
        new Migrator({
          db: dialect === "sqlite" ? migrating.withPlugin(new SqliteBooleanPlugin()) : migrating,
          provider: { getMigrations: async () => allMigrations(dialect) },
          // Domains number their migrations in their own ranges, so a later range may land first.
          allowUnorderedMigrations: true,
        });
      // PostgreSQL's migrations take a lock of their own (Kysely's adapter) and run in a transaction.
      const { error, results } = inTransaction
        ? await migrateHoldingWriteLock(db, inTransaction, migrator, onWaiting)
        : await migrator(db).migrateToLatest();
      const failed = results?.find((result) => result.status === "Error");
      if (error || failed) {
        // Kysely calls such a store "corrupted": it is a newer version's, and an operator downgraded.
        // Not asked of a store that does not answer: its connect timeout would be waited for twice.
        const unknown = isStoreUnavailable(error) ? [] : await unknownMigrations(db, dialect).catch(() => []);
        if (unknown.length > 0) {
          throw new Error(
            `the store was migrated by a newer Cumulo (migrations this version does not know: ${unknown.join(", ")}); run that version or a newer one`,
          );
        }
        const reason = error instanceof Error ? error.message : String(error ?? "unknown error");
        // No migration named: the store failed before any ran (it could not be reached, say).
        throw new Error(
          failed ? `Migration ${failed.migrationName} failed: ${reason}` : `Migrating failed: ${reason}`,
        );
      }
      return (results ?? [])
        .filter((result) => result.status === "Success")
        .map((result) => result.migrationName);
    },
    async ping() {
      try {
        await sql`select 1`.execute(db);
        return true;
      } catch {
        return false;
      }
    },
    readiness() {
      readinessInFlight ??= askReadiness().finally(() => {
        readinessInFlight = undefined;
      });
      return readinessInFlight;
    },
    async close() {
      await Promise.all(listeners.map((listener) => listener.close()));
      fileGuard?.stop();
      await checkpointer?.stop();
      // After the pool's end, which waits for the queries in flight: they may be the stalled ones.
      await db.destroy();
      watchdog?.close();
    },
  };
}
