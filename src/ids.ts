import { randomUUID } from "node:crypto";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether free text (a path segment, a query value, a CLI argument) is a UUID, in either case. */
export const isUuid = (value: string): boolean => UUID.test(value);

/** The last `timeOrderedUuidPrefix`, reused within its millisecond. */
let prefixTime = Number.NaN;
let prefix = "";

/** A version 7 UUID's first 15 characters, "xxxxxxxx-xxxx-7": the Unix time in milliseconds and the version. */
export function timeOrderedUuidPrefix(now: number = Date.now()): string {
  if (now !== prefixTime) {
    const time = now.toString(16).padStart(12, "0");
    prefix = `${time.slice(0, 8)}-${time.slice(8)}-7`;
    prefixTime = now;
  }
  return prefix;
}

/**
 * A version 7 UUID (RFC 9562): the Unix time in milliseconds, then 74 random bits. Rows keyed by it
 * are added at the end of their indexes instead of at a random place in them, so a commit writes the
 * same few pages however large the table has grown (docs/performance.md, session 15). Its random
 * bits are those of `randomUUID`, which draws from a buffer of entropy filled in advance: 0.2 µs an
 * id, against 1.8 µs for a UUID library asking the system for 16 random bytes each time.
 */
export function timeOrderedUuid(now: number = Date.now()): string {
  // randomUUID's xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx: its variant (V) stays, its version becomes 7.
  return timeOrderedUuidPrefix(now) + randomUUID().slice(15);
}
