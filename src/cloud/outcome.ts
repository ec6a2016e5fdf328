import { isUniqueViolation } from "../store/transactions.ts";
import { DriverRejection } from "./driver/types.ts";

/** Expected failures of cloud operations; routes turn them into the contract's error bodies. */
export type Failure =
  | { kind: "not_found"; thing: string; message?: string }
  | { kind: "conflict"; message: string }
  | { kind: "invalid"; field: string; message: string }
  | { kind: "forbidden"; message: string };

export type Outcome<T> = { ok: true; value: T } | { ok: false; failure: Failure };

/**
 * Thrown inside a service (often inside a transaction, so the transaction rolls back) and turned
 * back into a failed Outcome at the service boundary by `settle`.
 */
export class Fail extends Error {
  constructor(readonly failure: Failure) {
    super(failure.kind);
  }

  static notFound(thing: string, message?: string): Fail {
    return new Fail({ kind: "not_found", thing, ...(message ? { message } : {}) });
  }

  static conflict(message: string): Fail {
    return new Fail({ kind: "conflict", message });
  }

  static invalid(field: string, message: string): Fail {
    return new Fail({ kind: "invalid", field, message });
  }
}

export async function settle<T>(work: () => Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: true, value: await work() };
  } catch (error) {
    if (error instanceof Fail) return { ok: false, failure: error.failure };
    if (error instanceof DriverRejection)
      return { ok: false, failure: { kind: "conflict", message: error.message } };
    throw error;
  }
}

/**
 * Runs a transaction that picks a free slot (an address, a device name) and lets the store's unique
 * index reject a slot taken concurrently; on such a rejection the whole transaction runs again and
 * sees the winner's row.
 */
export async function retryOnConflict<T>(work: () => Promise<T>, attempts = 60): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (!isUniqueViolation(error) || attempt >= attempts) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(20, attempt * 2)));
    }
  }
}
