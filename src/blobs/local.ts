import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { access, mkdir, rename, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import { assertBlobKey, type BlobStore, BlobTooLargeError, type StoredBlob } from "./store.ts";

/** Counts bytes as they pass and fails the pipeline as soon as the limit is crossed. */
class SizeLimit extends Transform {
  bytes = 0;

  constructor(private readonly maxBytes: number) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.maxBytes) {
      callback(new BlobTooLargeError(this.maxBytes));
      return;
    }
    callback(null, chunk);
  }
}

/** Blobs as files under `${dataDir}/blobs`; uploads land in `.tmp/` and are renamed into place. */
export class LocalBlobStore implements BlobStore {
  readonly #root: string;
  readonly #tmp: string;

  constructor(dataDir: string) {
    this.#root = join(dataDir, "blobs");
    this.#tmp = join(this.#root, ".tmp");
  }

  #path(key: string): string {
    assertBlobKey(key);
    return join(this.#root, ...key.split("/"));
  }

  async put(key: string, body: Readable, options: { maxBytes: number }): Promise<StoredBlob> {
    const target = this.#path(key);
    await mkdir(this.#tmp, { recursive: true });
    const temp = join(this.#tmp, randomUUID());
    const limit = new SizeLimit(options.maxBytes);
    try {
      await pipeline(body, limit, createWriteStream(temp, { flags: "wx" }));
      await mkdir(dirname(target), { recursive: true });
      await rename(temp, target);
    } catch (error) {
      await rm(temp, { force: true });
      throw error;
    }
    return { key, sizeBytes: limit.bytes };
  }

  open(key: string, range?: { start: number; end: number }): Readable {
    return createReadStream(this.#path(key), range ? { start: range.start, end: range.end } : {});
  }

  async stat(key: string): Promise<{ sizeBytes: number; modifiedAt: Date } | undefined> {
    try {
      const found = await stat(this.#path(key));
      return found.isFile() ? { sizeBytes: found.size, modifiedAt: found.mtime } : undefined;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
  }

  async exists(key: string): Promise<boolean> {
    try {
      await access(this.#path(key));
      return true;
    } catch {
      return false;
    }
  }

  async delete(key: string): Promise<void> {
    await rm(this.#path(key), { force: true });
  }

  async deletePrefix(prefix: string): Promise<void> {
    await rm(this.#path(prefix), { recursive: true, force: true });
  }
}
