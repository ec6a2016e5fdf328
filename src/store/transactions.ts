import type { Kysely, Transaction } from "kysely";
import type { Database } from "./tables.ts";

/** What a repository method runs on: the store itself, or the transaction of the write it belongs to. */
export type Executor = Kysely<Database> | Transaction<Database>;
export type Trx = Transaction<Database>;

/** Runs `work` as one transaction: every write a request makes goes through here. */
export type Transact = <T>(work: (trx: Trx) => Promise<T>) => Promise<T>;

/**
 * PostgreSQL ends one of two transactions that wait on each other (a deletion removing an endpoint's
 * attempts while the webhook dispatcher claims some of them, each row by row in its own order), or
 * one that cannot be serialized; what it rolled back can simply run again, up to this many tries.
 */
const TRIES_WHEN_ROLLED_BACK = 3;
const ROLLED_BACK_TO_RETRY = new Set(["40P01", "40001"]);

export function transactor(db: Kysely<Database>): Transact {
  return async (work) => {
    for (let tries = 1; ; tries++) {
      try {
        return await db.transaction().execute(work);
      } catch (error) {
        const code = (error as { code?: unknown } | null)?.code;
        if (tries >= TRIES_WHEN_ROLLED_BACK || !ROLLED_BACK_TO_RETRY.has(code as string)) throw error;
      }
    }
  };
}

/** A unique-index violation, as SQLite and PostgreSQL each report it. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "23505" || code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}
