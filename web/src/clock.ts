import { useEffect, useState } from "react";

/** setTimeout's longest delay (about 24.8 days): a longer one would fire at once. */
const LONGEST_TIMEOUT_MS = 2 ** 31 - 1;

/**
 * The time now, for a page that shows "until <moment>": the component renders again when the
 * earliest of `moments` still to come passes, so what it shows stays true without a reload. One
 * timer, for that moment alone (no polling), cleared on unmount.
 */
export function useNowRenewedAt(moments: readonly (string | null | undefined)[]): number {
  const [passes, setPasses] = useState(0);
  const now = Date.now();
  const upcoming = moments
    .map((moment) => (moment ? Date.parse(moment) : Number.NaN))
    .filter((at) => at > now);
  const next = upcoming.length > 0 ? Math.min(...upcoming) : undefined;
  // biome-ignore lint/correctness/useExhaustiveDependencies: `passes` sets the timer again when one fired before `next` (a clamped delay, a clock set back)
  useEffect(() => {
    if (next === undefined) return;
    const timer = setTimeout(
      () => setPasses((count) => count + 1),
      Math.min(next - Date.now(), LONGEST_TIMEOUT_MS),
    );
    return () => clearTimeout(timer);
  }, [next, passes]);
  return now;
}
