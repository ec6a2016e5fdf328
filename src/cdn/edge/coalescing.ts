/**
 * Concurrent misses of one object become one origin request: the first viewer leads the fetch, the
 * others wait for what it shares.
 */
export class MissCoalescer<Shared> {
  readonly #inflight = new Map<string, Promise<Shared>>();

  /** @param nothing what waiting viewers get when the leader's fetch shares nothing. */
  constructor(private readonly nothing: Shared) {}

  /** What the fetch already under way for `key` shares, or undefined when none is. */
  waitFor(key: string): Promise<Shared> | undefined {
    return this.#inflight.get(key);
  }

  /**
   * Runs `fetch` as the one origin request for `key`. It calls `share` as soon as its result is known
   * (before streaming anything to its own viewer); waiting viewers get `nothing` if it never does.
   */
  async lead(key: string, fetch: (share: (result: Shared) => void) => Promise<void>): Promise<void> {
    let settle: (result: Shared) => void = () => undefined;
    this.#inflight.set(
      key,
      new Promise<Shared>((resolve) => {
        settle = resolve;
      }),
    );
    let settled = false;
    const share = (result: Shared) => {
      if (settled) return;
      settled = true;
      this.#inflight.delete(key);
      settle(result);
    };
    try {
      await fetch(share);
    } finally {
      share(this.nothing);
    }
  }
}
