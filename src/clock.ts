/** Time source, injected so tests and workers agree on "now". */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export const nowIso = (clock: Clock): string => clock.now().toISOString();
