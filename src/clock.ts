/** Time source, injected so tests and workers agree on "now". */
export interface Clock {
  now(): Date;
}

let clockReads = 0;

/**
 * How many times the system clock and developer mode's clock were read so far: an answer computed
 * while this did not move did not depend on the time (src/http/response-cache.ts).
 */
export const timesClockRead = (): number => clockReads;

export const systemClock: Clock = {
  now: () => {
    clockReads++;
    return new Date();
  },
};

export const nowIso = (clock: Clock): string => clock.now().toISOString();

/** The last instant with a four-digit year, which the stores and the API's timestamps need. */
export const LATEST_INSTANT = Date.parse("9999-12-31T23:59:59.999Z");

/**
 * The latest "now" developer mode's clock reaches: a year short of `LATEST_INSTANT`, so what is
 * reckoned ahead of it (leases, webhook retries, sessions, invitations, secret overlaps: a month at
 * most) is still a date the stores can hold, and still later than now.
 */
export const LATEST_CLOCK_INSTANT = Date.parse("9998-12-31T23:59:59.999Z");

/**
 * `ms` after `at`, but no later than `LATEST_INSTANT`: a configured duration may be as long as 100
 * years (a host name's pending claim, CUMULO_CDN_HOSTNAME_CLAIM_TTL_HOURS), which added to a clock
 * moved far ahead would pass the last date the stores and the API's timestamps can hold.
 */
export const laterBy = (at: Date, ms: number): Date => new Date(Math.min(at.getTime() + ms, LATEST_INSTANT));

/**
 * Whether a time stamp written at most once every `everyMs` (a key's last use, a session's last
 * request) is due to be written again: that long before `now`, or as far ahead of it, which only
 * developer mode's clock put back makes (otherwise real use would go unrecorded until the clock
 * caught up with the stamp).
 */
export const stampDue = (stamp: string, now: Date, everyMs: number): boolean =>
  Math.abs(now.getTime() - Date.parse(stamp)) >= everyMs;

/**
 * The real clock moved by an offset: developer mode's clock, which a test moves forward (or back to
 * real time) while every service keeps reading "now" from it. Moved to its last instant
 * (`LATEST_CLOCK_INSTANT`), it stays there.
 */
export class OffsetClock implements Clock {
  /** How far ahead of real time (milliseconds; 0 is real time). */
  offsetMs = 0;

  now(): Date {
    clockReads++;
    return new Date(Math.min(Date.now() + this.offsetMs, LATEST_CLOCK_INSTANT));
  }
}
