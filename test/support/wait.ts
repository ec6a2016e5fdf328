/** The tests' waiting helpers: awaiting a condition instead of sleeping, and bounding what must not hang. */

/** Polls `check` every 20 ms until it returns a value (not `undefined` or `false`). */
export async function waitUntil<T>(
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 30_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** `promise`'s value, or an error naming `what` when it has not settled within `timeoutMs` (a hang). */
export async function settledWithin<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, hung]);
  } finally {
    clearTimeout(timer);
  }
}
