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
 * one that cannot be serialized, or one that did not get a lock within the `lock_timeout` it set;
 * what it rolled back can simply run again, by default up to this many tries.
 */
const TRIES_WHEN_ROLLED_BACK = 3;
const ROLLED_BACK_TO_RETRY = new Set(["40P01", "40001", "55P03"]);

export function transactor(db: Kysely<Database>, tries = TRIES_WHEN_ROLLED_BACK): Transact {
  return async (work) => {
    for (let tried = 1; ; tried++) {
      try {
        return await db.transaction().execute(work);
      } catch (error) {
        const code = (error as { code?: unknown } | null)?.code;
        if (tried >= tries || !ROLLED_BACK_TO_RETRY.has(code as string)) throw error;
      }
    }
  };
}

/** A unique-index violation, as SQLite and PostgreSQL each report it. */
export function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "23505" || code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}

/**
 * A row written with a reference to a row that is gone: on PostgreSQL, a parent (a library, a video)
 * that another request deleted between this request's read of it and its insert. Deletions remove
 * children before their parents, so the other side of the constraint is not expected.
 */
export function isMissingReference(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "23503" || code === "SQLITE_CONSTRAINT_FOREIGNKEY";
}
