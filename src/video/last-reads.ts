import { LRUCache } from "lru-cache";
import { isStoreUnavailable } from "../store/unavailable.ts";

/** Reads kept for an outage: one entry per library, video, rendition set, subtitle list... */
const READS_KEPT = 20_000;
/**
 * How long before the store went away a read must have been made to be served during the outage:
 * a change made on another node since that read is not seen until the store is back.
 */
export const OUTAGE_GRACE_MS = 60_000;

interface Kept {
  value: unknown;
  readAt: number;
}

/**
 * Playback's reads of the store, each answer kept, so that videos being watched go on playing while
 * the store is away (a PostgreSQL restart or failover): a read the store cannot answer is served its
 * last answer, if that was read at most `OUTAGE_GRACE_MS` before the store last answered. With the
 * store up every read is fresh, so a rule or a deletion holds at once; a video nobody played shortly
 * before the outage is a 503 as before.
 */
export class LastReads {
  readonly #kept = new LRUCache<string, Kept>({ max: READS_KEPT });
  #lastAnswerAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly now: () => number = () => performance.now()) {}

  async read<T>(key: string, load: () => Promise<T>): Promise<T> {
    try {
      const value = await load();
      const readAt = this.now();
      this.#lastAnswerAt = readAt;
      this.#kept.set(key, { value, readAt });
      return value;
    } catch (error) {
      const kept = isStoreUnavailable(error) ? this.#kept.get(key) : undefined;
      if (!kept || kept.readAt < this.#lastAnswerAt - OUTAGE_GRACE_MS) throw error;
      return kept.value as T;
    }
  }
}
