import { randomUUID } from "node:crypto";

/**
 * The other nodes' word that they acted on an announcement (a purge, a key change), waited for by the
 * node that made it before it answers: each node is counted once, and the wait ends after `timeoutMs`
 * at most, since a node that cannot answer in time must not hold the announcer up.
 */
export class Acknowledgements {
  readonly #waiters = new Map<string, (node: string) => void>();

  constructor(private readonly timeoutMs: number) {}

  /** `node` says it acted on announcement `id` (ignored unless this node is waiting for it). */
  heard(id: string, node: string): void {
    this.#waiters.get(id)?.(node);
  }

  /** Whether `id` is this node's own announcement, still being waited for. */
  awaits(id: string): boolean {
    return this.#waiters.has(id);
  }

  /**
   * Makes an announcement under a new id (`announce` resolves to how many other nodes were sent it)
   * and resolves once that many have acknowledged it, or after the timeout.
   */
  async announce(announce: (id: string) => Promise<number>): Promise<void> {
    const id = randomUUID();
    const acknowledged = new Set<string>();
    let expected = Number.POSITIVE_INFINITY;
    let finish = () => {};
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    // Acknowledgements can arrive before the announcement has told how many to expect.
    this.#waiters.set(id, (node) => {
      acknowledged.add(node);
      if (acknowledged.size >= expected) finish();
    });
    const timer = setTimeout(finish, this.timeoutMs);
    try {
      expected = await announce(id);
      if (acknowledged.size >= expected) finish();
      await finished;
    } finally {
      clearTimeout(timer);
      this.#waiters.delete(id);
    }
  }
}
