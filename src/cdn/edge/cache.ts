import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import type CachePolicy from "http-cache-semantics";
import { LRUCache } from "lru-cache";
import type { DiskTier } from "./disk-tier.ts";
import { normalizedPathAndQuery } from "./path-normalization.ts";

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

/**
 * Per-entry memory besides the body, its headers and key: the cache policy (which keeps the
 * request's and the answer's headers), the entry's objects and the indexes. Measured by
 * `bench/edge-cache-memory.ts` at about 1,250-1,300 bytes for a browser's request, of which the
 * headers and key counted apart make about 270: the cache then holds 0.94-1.02 of its bound for
 * bodies of 100 bytes to 16 KiB (at 512 here it held 1.28-1.53 of it for small objects), more when
 * small bodies keep slabs of Node's buffer pool alive (see the origin fetch).
 */
const ENTRY_OVERHEAD_BYTES = 1024;

const headerBytes = (headers: OutgoingHttpHeaders): number => {
  let total = 0;
  for (const [name, value] of Object.entries(headers)) total += name.length + String(value).length + 4;
  return total;
};

/** Characters a browser percent-encodes in a URL's path and query: space, `"<>\``, DEL and non-ASCII. */
const ENCODED_BY_BROWSERS = /[ "<>`\u007F-\u{10FFFF}]/gu;

/**
 * A purge path as viewers' browsers send it: `/café.png` purges the `/caf%C3%A9.png` they ask for.
 * A lone surrogate, which no browser can send, is left as it is.
 */
function asBrowsersSendIt(path: string): string {
  return path.replace(ENCODED_BY_BROWSERS, (character) => {
    try {
      return encodeURIComponent(character);
    } catch {
      return character;
    }
  });
}

/**
 * Which cached paths a purge path names: `/*` all, `/prefix*` by prefix, `/path` with any query,
 * `/path?q` exactly. Keys are normalized (`normalizedPathAndQuery`), and so are purge paths, so
 * `/a/b` also purges what viewers asked for as `/a/./b` or `/%61/b`.
 */
function purgeMatcher(purged: string[]): (pathAndQuery: string) => boolean {
  const spellings = purged.flatMap((path) => [path, asBrowsersSendIt(path)]);
  const paths = [...new Set(spellings.map(normalizedPathAndQuery))];
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

/** The path and query a cache key is for (keys: `distribution id`, path and query, then any variant, by line). */
export const pathOfKey = (key: string): string => key.split("\n", 2)[1] ?? "";

/** Header names of a `Vary` value, lower-cased; `["*"]` when it varies by anything. */
function varyNames(vary: OutgoingHttpHeaders[string]): string[] {
  const names = String(vary ?? "")
    .split(",")
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== "");
  return names.includes("*") ? ["*"] : [...new Set(names)].sort();
}

/** Remembered `Vary` sets: one short list per path that has varied, bounded like any cache. */
const MAX_VARYING_PATHS = 100_000;

/**
 * The edge's cache: memory bounded by bytes (least recently used objects leave first), and when a
 * disk tier is given, objects evicted from memory go there. Keys are `distribution id` + path and
 * query, and, when the origin's answer for that path named `Vary` headers, the request's values of
 * them: each variant is stored apart. An index per distribution makes purges cheap.
 */
export class EdgeCache {
  readonly #lru: LRUCache<string, CachedObject>;
  readonly #varying = new LRUCache<string, string[]>({ max: MAX_VARYING_PATHS });
  readonly #keysByDistribution = new Map<string, Set<string>>();
  readonly #purgeEpochs = new Map<string, number>();
  #clears = 0;
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

  /** The key of the variant a request asks for, by the `Vary` names last seen for its path. */
  #variantKey(primary: string, request: IncomingHttpHeaders, names = this.#varying.get(primary)): string {
    if (!names) return primary;
    const values = names.map((name) => {
      // Only the request's own headers: a name such as `constructor` is not one.
      const value = Object.hasOwn(request, name) ? request[name] : undefined;
      return `${name}:${(Array.isArray(value) ? value.join(",") : (value ?? "")).trim()}`;
    });
    return `${primary}\n${values.join("\n")}`;
  }

  /**
   * The key the variant a request asks for is stored under: the path's key, with the request's values
   * of the `Vary` headers last seen for it. Misses and revalidations are coalesced by it.
   */
  variantKey(distributionId: string, pathAndQuery: string, request: IncomingHttpHeaders): string {
    return this.#variantKey(EdgeCache.key(distributionId, pathAndQuery), request);
  }

  /** The variant a request asks for: from memory at once, or a promise of the disk tier's copy. */
  get(
    distributionId: string,
    pathAndQuery: string,
    request: IncomingHttpHeaders,
  ): CachedObject | undefined | Promise<CachedObject | undefined> {
    const key = this.variantKey(distributionId, pathAndQuery, request);
    const inMemory = this.#lru.get(key);
    if (inMemory || !this.#disk) return inMemory;
    return this.#fromDisk(this.#disk, key, distributionId, pathAndQuery, request);
  }

  /** Moves a copy the disk tier kept back into memory. */
  async #fromDisk(
    disk: DiskTier,
    key: string,
    distributionId: string,
    pathAndQuery: string,
    request: IncomingHttpHeaders,
  ): Promise<CachedObject | undefined> {
    const epoch = this.epoch(distributionId);
    const fromDisk = await disk.take(key);
    if (fromDisk) this.set(distributionId, pathAndQuery, request, fromDisk, epoch);
    return fromDisk;
  }

  /**
   * Stores the object as the variant `request` asked for, unless a purge of its distribution happened
   * since `epoch` was read. An answer that varies by anything (`Vary: *`) is not stored.
   */
  set(
    distributionId: string,
    pathAndQuery: string,
    request: IncomingHttpHeaders,
    object: CachedObject,
    epoch: number,
  ): boolean {
    if (this.epoch(distributionId) !== epoch) return false;
    const primary = EdgeCache.key(distributionId, pathAndQuery);
    const names = varyNames(object.headers.vary);
    if (names[0] === "*") return false;
    if (names.length > 0) this.#varying.set(primary, names);
    else this.#varying.delete(primary);
    const key = this.#variantKey(primary, request, names.length > 0 ? names : undefined);
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

  delete(distributionId: string, pathAndQuery: string, request: IncomingHttpHeaders): void {
    this.#lru.delete(this.variantKey(distributionId, pathAndQuery, request));
  }

  /**
   * Counter bumped by every purge of the distribution and every `clear()`; a fetch started before
   * either is not stored.
   */
  epoch(distributionId: string): number {
    return (this.#purgeEpochs.get(distributionId) ?? 0) + this.#clears;
  }

  /** Drops every object of every distribution, in memory and on disk. */
  clear(): void {
    this.#clears++;
    this.#lru.clear();
    this.#keysByDistribution.clear();
    this.#disk?.clear();
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
    let removed = 0;
    for (const key of [...keys]) {
      if (matches(pathOfKey(key))) {
        this.#lru.delete(key);
        removed++;
      }
    }
    return removed;
  }

  dropDistribution(distributionId: string): void {
    this.purge(distributionId, ["/*"]);
  }

  /**
   * A deleted distribution: its objects go, and so does its purge count, which would otherwise stay
   * for every distribution ever deleted. Its id is never used again: a fetch still running for it
   * may store an object nobody asks for, which leaves as the least recently used.
   */
  forgetDistribution(distributionId: string): void {
    this.dropDistribution(distributionId);
    this.#purgeEpochs.delete(distributionId);
  }

  /** Distributions this cache keeps a purge count for (each one purged or changed since it started). */
  get purgeCounts(): number {
    return this.#purgeEpochs.size;
  }

  get size(): number {
    return this.#lru.size;
  }

  get bytes(): number {
    return this.#lru.calculatedSize;
  }
}
