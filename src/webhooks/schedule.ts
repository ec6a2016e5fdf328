/** A retry policy as endpoints store it (`retry_policy`), in seconds. */
export interface RetryPolicy {
  max_attempts: number;
  initial_delay_s: number;
  multiplier: number;
  max_delay_s: number;
}

/** Delays after attempts 1..7 when an endpoint sets no policy: 8 attempts over about 28 hours. */
export const DEFAULT_RETRY_DELAYS_S = [5, 300, 1800, 7200, 18_000, 36_000, 36_000] as const;
export const DEFAULT_MAX_ATTEMPTS = DEFAULT_RETRY_DELAYS_S.length + 1;
const JITTER = 0.1;
/**
 * The longest wait a policy may set (30 days): its fields are bounded by it (schemas.ts), and the wait
 * is clamped to it too, since a longer one would reach past the dates the store can hold.
 */
export const MAX_RETRY_DELAY_S = 30 * 86_400;

/**
 * How long to wait before the next scheduled attempt, after `attemptsMade` scheduled attempts
 * (1 = the first attempt just failed); undefined when the schedule is exhausted. Jitter adds up to 10%
 * so that receivers coming back are not hit by every retry at the same instant.
 */
export function nextRetryDelayMs(
  policy: RetryPolicy | null,
  attemptsMade: number,
  random: () => number = Math.random,
): number | undefined {
  let seconds: number;
  if (policy) {
    if (attemptsMade >= policy.max_attempts) return undefined;
    const grown = policy.initial_delay_s * policy.multiplier ** (attemptsMade - 1);
    seconds = Math.min(grown, policy.max_delay_s, MAX_RETRY_DELAY_S);
  } else {
    const scheduled = DEFAULT_RETRY_DELAYS_S[attemptsMade - 1];
    if (scheduled === undefined) return undefined;
    seconds = scheduled;
  }
  const ms = seconds * 1000;
  return Math.round(ms + ms * JITTER * random());
}

/** `Retry-After` as delta seconds or an HTTP date, in milliseconds from `now`; undefined if unusable. */
export function parseRetryAfter(value: string | undefined, now: Date): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now.getTime());
}
