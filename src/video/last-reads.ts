import { LRUCache } from "lru-cache";
import { isStoreUnavailable } from "../store/unavailable.ts";

/** Reads kept for an outage: one entry per library, video, rendition set, subtitle list... */
const READS_KEPT = 20_000;
/**
 * How long before this node found the store away a read must have been made to be served during the
 * outage: a change made since that read (on any node) is not seen until the store is back.
 */
export const OUTAGE_GRACE_MS = 60_000;
/**
 * While the store is away, how often a read that could be answered from memory asks it again, to
 * learn it is back. The others answer at once: an unreachable server (a network cut) makes each
 * attempt wait the connect timeout, 10 s by default, which no player waits for a segment.
 */
export const ASK_AGAIN_WHILE_AWAY_MS = 1_000;
/**
 * How long a read with a kept answer waits for the store before the store counts as away: a
 * network cut that leaves the connections open gives no error at all, only silence (a viewer waited
 * 30 s for each segment, QA of session 47). The read itself goes on, and its answer, when it comes,
 * counts as the store's.
 */
export const READ_PATIENCE_MS = 2_000;

const SILENCE = Symbol("the store's silence");

interface Kept {
  value: unknown;
  readAt: number;
}

/**
 * Playback's reads of the store, each answer kept, so that videos being watched go on playing while
 * the store is away (a PostgreSQL restart or failover): a read the store cannot answer is served its
 * last answer, if that was read at most `OUTAGE_GRACE_MS` before this node found the store away. With
 * the store up every read is fresh, so a rule or a deletion holds at once; a video nobody played on
 * this node shortly before the outage is a 503 as before. A read by an id the request named that
 * finds nothing drops its key (requests for made-up ids cannot push the watched videos out); one for
 * what a video may lack (its uploaded thumbnail, its library's default player) keeps that answer
 * (`keepNotFound`).
 */
export class LastReads {
  readonly #kept = new LRUCache<string, Kept>({ max: READS_KEPT });
  /** When a read first found the store away; undefined while it answers. */
  #awaySince: number | undefined;
  #askedWhileAwayAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly now: () => number = () => performance.now()) {}

  async read<T>(key: string, load: () => Promise<T>, { keepNotFound = false } = {}): Promise<T> {
    const servable = this.#servable(key);
    if (servable) {
      if (this.now() - this.#askedWhileAwayAt < ASK_AGAIN_WHILE_AWAY_MS) return servable.value as T;
      this.#askedWhileAwayAt = this.now();
    }
    const reading = load().then((value) => {
      this.#awaySince = undefined;
      if ((value === undefined || value === null) && !keepNotFound) this.#kept.delete(key);
      else this.#kept.set(key, { value, readAt: this.now() });
      return value;
    });
    try {
      return await this.#withinPatience(key, reading);
    } catch (error) {
      if (!isStoreUnavailable(error)) throw error;
      this.#foundAway();
      const kept = this.#servable(key);
      if (!kept) throw error;
      return kept.value as T;
    }
  }

  /**
   * The read's answer; or, when it has a kept answer and the store has not answered within
   * `READ_PATIENCE_MS`, that kept answer, the store counting as away from then.
   */
  async #withinPatience<T>(key: string, reading: Promise<T>): Promise<T> {
    if (!this.#kept.has(key)) return reading;
    let timer: NodeJS.Timeout | undefined;
    const silence = new Promise<typeof SILENCE>((resolve) => {
      timer = setTimeout(() => resolve(SILENCE), READ_PATIENCE_MS);
      timer.unref();
    });
    try {
      const first = await Promise.race([reading, silence]);
      if (first !== SILENCE) return first;
    } finally {
      clearTimeout(timer);
    }
    this.#foundAway();
    const kept = this.#servable(key);
    // Its answer still counts when it comes; a failure then is nobody's to hear.
    reading.catch(() => undefined);
    return kept ? (kept.value as T) : reading;
  }

  #foundAway(): void {
    this.#awaySince ??= this.now();
    this.#askedWhileAwayAt = this.now();
  }

  /** The kept answer of `key`, if the store is away and that answer may stand in for it. */
  #servable(key: string): Kept | undefined {
    if (this.#awaySince === undefined) return undefined;
    const kept = this.#kept.get(key);
    return kept && kept.readAt >= this.#awaySince - OUTAGE_GRACE_MS ? kept : undefined;
  }
}
