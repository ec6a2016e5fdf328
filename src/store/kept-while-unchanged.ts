import { LRUCache } from "lru-cache";
import type { StoreGeneration } from "./database.ts";

interface Kept<Value> {
  generation: number;
  value: Value;
}

/**
 * Values made only from stored data, kept by key and given again while the store's generation holds:
 * the rule of kept answers (src/http/response-cache.ts) for the part of an answer that does not
 * depend on the clock, when the whole answer does. A value is kept only if the generation did not move
 * while it was made, so a kept value is always the one `make` would return now. The key must name
 * everything `make` reads besides the store, the caller's organization first.
 */
export class KeptWhileUnchanged<Value extends object> {
  readonly #values: LRUCache<string, Kept<Value>>;

  constructor(
    private readonly generation: StoreGeneration,
    limits: { maxBytes: number; maxEntryBytes: number; bytesOf: (value: Value) => number },
  ) {
    this.#values = new LRUCache({
      maxSize: limits.maxBytes,
      maxEntrySize: limits.maxEntryBytes,
      sizeCalculation: (kept, key) => limits.bytesOf(kept.value) + key.length * 2,
    });
  }

  async get(key: string, make: () => Promise<Value>): Promise<Value> {
    // SQLite knows at once; only PostgreSQL waits to have heard of other processes' commits.
    if (this.generation.caughtUp) await this.generation.caughtUp();
    const before = this.generation.current();
    // While the store cannot say what changed, every value is made afresh.
    if (before === undefined) return make();
    const kept = this.#values.get(key);
    if (kept?.generation === before) return kept.value;
    const value = await make();
    if (this.generation.current() === before) this.#values.set(key, { generation: before, value });
    return value;
  }
}
