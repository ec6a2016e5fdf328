import { randomUUID } from "node:crypto";
import { mkdirSync, readdirSync, rmSync } from "node:fs";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type CachePolicy from "http-cache-semantics";
import { LRUCache } from "lru-cache";
import { makeDirectories } from "../../directories.ts";
import type { CachedObject } from "./cache.ts";
import { pathOfKey } from "./cache.ts";

interface StoredEntry {
  file: string;
  bytes: number;
}

interface StoredMeta extends Omit<CachedObject, "body" | "policy"> {
  policy: CachePolicy.CachePolicyObject;
}

const processAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * Second cache tier on local disk: objects the memory tier evicts are written here (bounded by
 * bytes, least recently used leave first) and promoted back to memory when asked for. It is a
 * per-process scratch space: it starts empty and is removed at shutdown; directories left by
 * processes that died are removed by the next one to start.
 */
export class DiskTier {
  readonly #directory: string;
  readonly #index: LRUCache<string, StoredEntry>;
  readonly #reads = new Map<string, Promise<CachedObject | undefined>>();
  /** Objects on their way to disk: still cached, so a lookup waits for the write. */
  readonly #writes = new Map<string, Promise<void>>();

  constructor(
    root: string,
    maxBytes: number,
    private readonly currentEpoch: (distributionId: string) => number,
    /** Turns a stored policy back into one on the edge's clock. */
    private readonly restorePolicy: (serialized: CachePolicy.CachePolicyObject) => CachePolicy,
  ) {
    makeDirectories(root);
    for (const name of readdirSync(root)) {
      if (/^\d+$/.test(name) && !processAlive(Number(name)))
        rmSync(join(root, name), { recursive: true, force: true });
    }
    this.#directory = join(root, String(process.pid));
    rmSync(this.#directory, { recursive: true, force: true });
    mkdirSync(this.#directory, { recursive: true });
    this.#index = new LRUCache<string, StoredEntry>({
      maxSize: maxBytes,
      sizeCalculation: (entry) => Math.max(1, entry.bytes),
      dispose: (entry) => {
        rm(join(this.#directory, entry.file), { force: true }).catch(() => {});
      },
    });
  }

  /** Keeps an object the memory tier let go, unless its distribution was purged meanwhile. */
  put(key: string, distributionId: string, object: CachedObject, epoch: number): Promise<void> {
    const write = this.#write(key, distributionId, object, epoch).finally(() => {
      if (this.#writes.get(key) === write) this.#writes.delete(key);
    });
    this.#writes.set(key, write);
    return write;
  }

  async #write(key: string, distributionId: string, object: CachedObject, epoch: number): Promise<void> {
    const meta: StoredMeta = {
      status: object.status,
      headers: object.headers,
      policy: object.policy.toObject(),
      freshUntil: object.freshUntil,
      ageAtReceipt: object.ageAtReceipt,
      receivedAt: object.receivedAt,
      varies: object.varies,
    };
    const metaBytes = Buffer.from(JSON.stringify(meta));
    const length = Buffer.alloc(4);
    length.writeUInt32BE(metaBytes.length);
    // Larger than the whole tier: the index would refuse it without removing its file, so it is not
    // written, and an older copy under its key goes as a replaced one would.
    if (length.length + metaBytes.length + object.body.length > this.#index.maxEntrySize) {
      this.#index.delete(key);
      return;
    }
    const file = randomUUID();
    const data = Buffer.concat([length, metaBytes, object.body]);
    const path = join(this.#directory, file);
    try {
      await writeFile(path, data);
      if (this.currentEpoch(distributionId) === epoch) this.#index.set(key, { file, bytes: data.length });
    } finally {
      // Only files the index holds are ever removed later: one it does not (a write that failed
      // half done, a purge meanwhile) goes now.
      if (this.#index.peek(key)?.file !== file) await rm(path, { force: true });
    }
  }

  /** Takes an object out of the disk tier (the caller keeps it in memory from now on). */
  async take(key: string): Promise<CachedObject | undefined> {
    await this.#writes.get(key)?.catch(() => {});
    const pending = this.#reads.get(key);
    if (pending) return pending;
    const entry = this.#index.get(key);
    if (!entry) return undefined;
    const read = this.#read(entry).finally(() => {
      this.#reads.delete(key);
      this.#index.delete(key);
    });
    this.#reads.set(key, read);
    return read;
  }

  async #read(entry: StoredEntry): Promise<CachedObject | undefined> {
    try {
      const data = await readFile(join(this.#directory, entry.file));
      const metaLength = data.readUInt32BE(0);
      const meta = JSON.parse(data.subarray(4, 4 + metaLength).toString()) as StoredMeta;
      return { ...meta, policy: this.restorePolicy(meta.policy), body: data.subarray(4 + metaLength) };
    } catch {
      return undefined; // removed meanwhile (purged or evicted): a miss
    }
  }

  /** Removes the distribution's objects whose path and query `matches` says. */
  purge(distributionId: string, matches: (pathAndQuery: string) => boolean): void {
    const prefix = `${distributionId}\n`;
    for (const key of [...this.#index.keys()]) {
      if (key.startsWith(prefix) && matches(pathOfKey(key))) this.#index.delete(key);
    }
  }

  /** Drops every object (their files go as the index lets them go). */
  clear(): void {
    this.#index.clear();
  }

  get bytes(): number {
    return this.#index.calculatedSize;
  }

  close(): void {
    this.#index.clear();
    rmSync(this.#directory, { recursive: true, force: true });
  }
}
