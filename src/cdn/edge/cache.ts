import type { OutgoingHttpHeaders } from "node:http";
import type CachePolicy from "http-cache-semantics";
import { LRUCache } from "lru-cache";
import type { DiskTier } from "./disk-tier.ts";

/** A fully received origin response, shared by every viewer that asks for it while it is fresh. */
export interface CachedObject {
  status: number;
  /** End-to-end headers as the origin sent them. */
  headers: OutgoingHttpHeaders;
  body: Buffer;
  policy: CachePolicy;
  /** Epoch ms until which the object is fresh (RFC 9111 freshness lifetime minus its age). */
  freshUntil: number;
  /** Age in seconds when it was received, and when that was (epoch ms). */
  ageAtReceipt: number;
  receivedAt: number;
  /** The response varies by request headers: the policy must compare them. */
  varies: boolean;
}

/** Freshness facts of a just-received response, computed once instead of on every hit. */
export function freshness(policy: CachePolicy, headers: OutgoingHttpHeaders, now = Date.now()) {
  const ageAtReceipt = policy.age();
  return {
    freshUntil: now + (policy.maxAge() - ageAtReceipt) * 1000,
    ageAtReceipt,
    receivedAt: now,
    varies: headers.vary !== undefined,
  };
}

/** Whole seconds since the origin generated the object (the `Age` header). */
export const currentAge = (object: CachedObject, now = Date.now()): number =>
  Math.max(0, Math.floor(object.ageAtReceipt + (now - object.receivedAt) / 1000));

// Rough per-entry overhead besides the body (key, headers, policy), so tiny objects are not free.
const ENTRY_OVERHEAD_BYTES = 512;

const headerBytes = (headers: OutgoingHttpHeaders): number => {
  let total = 0;
  for (const [name, value] of Object.entries(headers)) total += name.length + String(value).length + 4;
  return total;
};

/** Which cached paths a purge path names: `/*` all, `/prefix*` by prefix, `/path` with any query, `/path?q` exactly. */
function purgeMatcher(paths: string[]): (pathAndQuery: string) => boolean {
  const matchers = paths.map((path): ((pathAndQuery: string) => boolean) => {
    if (path.endsWith("*")) {
      const start = path.slice(0, -1);
      return (candidate) => candidate.startsWith(start);
    }
    if (path.includes("?")) return (candidate) => candidate === path;
    return (candidate) => candidate === path || candidate.startsWith(`${path}?`);
  });
  return (pathAndQuery) => matchers.some((matches) => matches(pathAndQuery));
}

/**
 * The edge's cache: memory bounded by bytes (least recently used objects leave first), and when a
 * disk tier is given, objects evicted from memory go there. Keys are `distribution id` + path and
 * query; an index per distribution makes purges cheap.
 */
export class EdgeCache {
  readonly #lru: LRUCache<string, CachedObject>;
  readonly #keysByDistribution = new Map<string, Set<string>>();
  readonly #purgeEpochs = new Map<string, number>();
  #disk: DiskTier | undefined;

  constructor(maxBytes: number) {
    this.#lru = new LRUCache<string, CachedObject>({
      maxSize: maxBytes,
      sizeCalculation: (value, key) =>
        value.body.length + headerBytes(value.headers) + key.length + ENTRY_OVERHEAD_BYTES,
      dispose: (value, key, reason) => {
        if (reason === "set") return; // replaced: the key is still cached
        const distributionId = key.slice(0, key.indexOf("\n"));
        const keys = this.#keysByDistribution.get(distributionId);
        keys?.delete(key);
        if (keys?.size === 0) this.#keysByDistribution.delete(distributionId);
        if (reason === "evict" && this.#disk) {
          this.#disk.put(key, distributionId, value, this.epoch(distributionId)).catch(() => {});
        }
      },
    });
  }

  /** Adds the disk tier: from now on objects evicted from memory are kept there. */
  useDiskTier(disk: DiskTier): void {
    this.#disk = disk;
  }

  static key(distributionId: string, pathAndQuery: string): string {
    return `${distributionId}\n${pathAndQuery}`;
  }

  async get(distributionId: string, pathAndQuery: string): Promise<CachedObject | undefined> {
    const key = EdgeCache.key(distributionId, pathAndQuery);
    const inMemory = this.#lru.get(key);
    if (inMemory || !this.#disk) return inMemory;
    const epoch = this.epoch(distributionId);
    const fromDisk = await this.#disk.take(key);
    if (fromDisk) this.set(distributionId, pathAndQuery, fromDisk, epoch);
    return fromDisk;
  }

  /** Stores an object unless a purge of its distribution happened since `epoch` was read. */
  set(distributionId: string, pathAndQuery: string, object: CachedObject, epoch: number): boolean {
    if (this.epoch(distributionId) !== epoch) return false;
    const key = EdgeCache.key(distributionId, pathAndQuery);
    this.#lru.set(key, object);
    if (!this.#lru.has(key)) return false; // larger than the whole cache
    let keys = this.#keysByDistribution.get(distributionId);
    if (!keys) {
      keys = new Set();
      this.#keysByDistribution.set(distributionId, keys);
    }
    keys.add(key);
    return true;
  }

  delete(distributionId: string, pathAndQuery: string): void {
    this.#lru.delete(EdgeCache.key(distributionId, pathAndQuery));
  }

  /** Counter bumped by every purge of the distribution; a fetch started before a purge is not stored. */
  epoch(distributionId: string): number {
    return this.#purgeEpochs.get(distributionId) ?? 0;
  }

  /**
   * Removes matching objects: `/*` everything, `/prefix*` every path and query starting with the
   * prefix, `/path` that path with any query, `/path?query` exactly that.
   */
  purge(distributionId: string, paths: string[]): number {
    this.#purgeEpochs.set(distributionId, this.epoch(distributionId) + 1);
    const matches = purgeMatcher(paths);
    this.#disk?.purge(distributionId, matches);
    const keys = this.#keysByDistribution.get(distributionId);
    if (!keys) return 0;
    const prefix = `${distributionId}\n`;
    let removed = 0;
    for (const key of [...keys]) {
      if (matches(key.slice(prefix.length))) {
        this.#lru.delete(key);
        removed++;
      }
    }
    return removed;
  }

  dropDistribution(distributionId: string): void {
    this.purge(distributionId, ["/*"]);
  }

  get size(): number {
    return this.#lru.size;
  }

  get bytes(): number {
    return this.#lru.calculatedSize;
  }
}
