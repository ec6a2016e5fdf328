import type { Kysely, Transaction } from "kysely";
import type { Database } from "./tables.ts";

/** What a repository method runs on: the store itself, or the transaction of the write it belongs to. */
export type Executor = Kysely<Database> | Transaction<Database>;
export type Trx = Transaction<Database>;

/** Runs `work` as one transaction: every write a request makes goes through here. */
export type Transact = <T>(work: (trx: Trx) => Promise<T>) => Promise<T>;

export function transactor(db: Kysely<Database>): Transact {
  return (work) => db.transaction().execute(work);
}

/** A unique-index violation, as SQLite and PostgreSQL each report it. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "23505" || code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}
