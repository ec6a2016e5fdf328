import { isUniqueViolation } from "../store/transactions.ts";
import { DriverRejection } from "./driver/types.ts";

/**
 * The failure members every cloud operation's outcome union is built from (each operation names the
 * ones it can answer); routes turn them into the contract's error bodies (routes/common.ts).
 */
export type NotFound = { outcome: "not_found"; thing: string };
export type Conflict = { outcome: "conflict"; message: string };
export type Invalid = { outcome: "invalid"; field: string; message: string };
export type Forbidden = { outcome: "forbidden"; message: string };
/** The infrastructure refused the change (`DriverRejection`); the operation was rolled back. */
export type Rejected = { outcome: "rejected"; message: string };
export type Deleted = { outcome: "deleted" };

export const notFound = (thing: string): NotFound => ({ outcome: "not_found", thing });
export const conflict = (message: string): Conflict => ({ outcome: "conflict", message });
export const invalid = (field: string, message: string): Invalid => ({ outcome: "invalid", field, message });
export const DELETED: Deleted = { outcome: "deleted" };

/**
 * Runs a write that calls the driver inside its transaction: a refusal thrown there rolls the
 * transaction back and comes out as a `rejected` outcome. Any other error is a real failure.
 */
export async function unlessRejected<T>(work: () => Promise<T>): Promise<T | Rejected> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof DriverRejection) return { outcome: "rejected", message: error.message };
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
