import { LRUCache } from "lru-cache";

type Row = Record<string, unknown>;

/**
 * Reads whose answer can change with no write at all: SQLite's clock and random functions, and this
 * connection's change counters. They are always run.
 */
const VOLATILE_SQL =
  /\b(?:random|randomblob|date|time|datetime|julianday|unixepoch|strftime|timediff|changes|total_changes|last_insert_rowid)\s*\(|\bcurrent_(?:date|time|timestamp)\b/i;
/** Pragmas are always run, and clear the cache: some of them change the connection or the file. */
const PRAGMA_SQL = /^\s*pragma\b/i;

/**
 * Reads of the work queues, webhook attempts and jobs. Almost every one is a claim's scan, followed by
 * the write that takes what it found, which clears the cache: keeping them cost a copy of every row and
 * answered nothing (docs/performance.md, session 12).
 */
const QUEUE_SQL = /\bfrom "(?:webhook_deliveries|jobs)"/;

type StatementKind = { reader: boolean; readonly: boolean };

/** A query that returns rows and changes nothing (`INSERT ... RETURNING` returns rows too). */
const isRead = (text: string, statement: StatementKind): boolean =>
  statement.reader && statement.readonly && !PRAGMA_SQL.test(text);

/**
 * BEGIN and COMMIT change no row: the writes between them clear the cache before they run, and what
 * was read after those writes is what COMMIT makes everyone's. So do a SAVEPOINT and its RELEASE
 * (src/store/sqlite-group-commit.ts). ROLLBACK takes it back, so it clears.
 */
const TRANSACTION_START_OR_COMMIT = /^\s*(?:begin|commit|end|savepoint|release)\b/i;

/** A statement after which every kept read still holds: a read, BEGIN or COMMIT. */
export const changesNothing = (text: string, statement: StatementKind): boolean =>
  isRead(text, statement) || TRANSACTION_START_OR_COMMIT.test(text);

/** A read worth keeping. */
export const isCacheableRead = (text: string, statement: StatementKind): boolean =>
  isRead(text, statement) && !VOLATILE_SQL.test(text) && !QUEUE_SQL.test(text);

// Bound parameters are strings, numbers, null, buffers or bigints; JSON has no bigint of its own.
const parameterJson = (_key: string, value: unknown): unknown =>
  typeof value === "bigint" ? { bigint: String(value) } : value;

const MAX_BYTES = 32 * 1024 * 1024;
const MAX_ENTRY_BYTES = 1024 * 1024;

/** A rough size of a result: its key, its values, and some overhead per row and value. */
function estimatedBytes(rows: Row[], key: string): number {
  let bytes = key.length * 2;
  for (const row of rows) {
    bytes += 64;
    for (const value of Object.values(row)) bytes += typeof value === "string" ? 16 + value.length * 2 : 16;
  }
  return bytes;
}

const newResults = () =>
  new LRUCache<string, Row[]>({
    maxSize: MAX_BYTES,
    maxEntrySize: MAX_ENTRY_BYTES,
    sizeCalculation: estimatedBytes,
  });

/**
 * The results of read-only statements on SQLite's one connection, by SQL text and parameters. Exact:
 * every statement on the connection that may change something (a write, ROLLBACK, a pragma) clears
 * it before it runs, and `data_version` (moved only by other connections' commits, e.g. the CLI's)
 * is checked before every read. Callers get copies of the rows, never the cached objects.
 */
export class SqliteReadCache {
  #results = newResults();
  #version: number;
  #generation = 0;

  constructor(private readonly dataVersion: () => number) {
    this.#version = dataVersion();
  }

  /**
   * A number that changes whenever the stored data may have changed: each clear, whether by a statement
   * of this connection or a commit of another one. Answers made from reads at one generation stay
   * exact while it holds (src/http/response-cache.ts).
   */
  currentGeneration(): number {
    const version = this.dataVersion();
    if (version !== this.#version) {
      this.clear();
      this.#version = version;
    }
    return this.#generation;
  }

  /** The rows of a cacheable read: cached ones while nothing can have changed them, else `run`'s. */
  read(text: string, parameters: ReadonlyArray<unknown>, run: () => Row[]): Row[] {
    // Checked before the statement runs: a commit landing in between is then seen on the next read.
    this.currentGeneration();
    const key = `${text}\u0000${JSON.stringify(parameters, parameterJson)}`;
    let rows = this.#results.get(key);
    if (!rows) {
      rows = run();
      this.#results.set(key, rows);
    }
    return rows.map((row) => ({ ...row }));
  }

  clear(): void {
    this.#generation++;
    // A new cache, not `LRUCache.clear()`: that walks arrays as long as the most entries the cache ever
    // held, so once many different reads had been kept, each statement of every write paid for all
    // of them (78 µs per clear after 20,000; docs/performance.md, session 11).
    if (this.#results.size > 0) this.#results = newResults();
  }
}
