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
 * The real clock moved by an offset: developer mode's clock, which a test moves forward (or back to
 * real time) while every service keeps reading "now" from it. Moved to its last instant, it stays
 * there.
 */
export class OffsetClock implements Clock {
  /** How far ahead of real time (milliseconds; 0 is real time). */
  offsetMs = 0;

  now(): Date {
    clockReads++;
    return new Date(Math.min(Date.now() + this.offsetMs, LATEST_INSTANT));
  }
}
