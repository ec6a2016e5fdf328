import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { createReadStream, createWriteStream } from "node:fs";
import { access, lstat, mkdir, readdir, rename, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { makeDirectories } from "../directories.ts";
import { SizeLimit } from "./size-limit.ts";
import {
  assertBlobKey,
  type BlobStore,
  BlobStoreRefusedError,
  BlobStoreUnavailableError,
  isStorageFault,
  type StoredBlob,
} from "./store.ts";

/**
 * Permissions the disk refuses (a file made immutable, a folder owned by another user) stay refused
 * until the operator changes them, as a bucket's refusal does: a removal spends its attempts on
 * them instead of waiting for ever. A read-only or full disk is only away: it must come back for
 * the node to work at all, and removals then go on by themselves.
 */
const REFUSALS = new Set(["EACCES", "EPERM"]);

/** A failure of the disk as the store's; the reason given is the error's code, which names no path. */
const storeError = (error: unknown, code = (error as NodeJS.ErrnoException | null)?.code): unknown => {
  if (REFUSALS.has(code ?? "")) return new BlobStoreRefusedError(error, code ?? "");
  return isStorageFault(error) ? new BlobStoreUnavailableError(error) : error;
};

/**
 * A removal's failure as the store's. Node's `rm` reports a file it may not remove (unlink's EPERM)
 * as `ENOTDIR` from `scandir`: its rimraf then takes the file for a folder and reads it.
 */
const removalFailed = (error: unknown): never => {
  const { code, syscall } = error as NodeJS.ErrnoException;
  throw storeError(error, code === "ENOTDIR" && syscall === "scandir" ? "EPERM" : code);
};

/** How often a removal goes over a folder again that an upload filled meanwhile (Node's `rm`). */
const REMOVAL_RETRIES = 5;
/**
 * Tries to put the file in place again when its folder is removed between `mkdir` and `rename`. One
 * removal goes over the folder up to `REMOVAL_RETRIES + 1` times, and each pass may undo a try twice
 * (the `mkdir`, then the `rename`): a put outlasts a whole removal.
 */
const PLACING_TRIES = 2 * (REMOVAL_RETRIES + 1);
/**
 * What a folder removed meanwhile fails with: `rename` finds no folder (ENOENT); `mkdir`, making the
 * parents one by one, finds one gone after it was told it exists (ENOTDIR, as Node reports it).
 */
const FOLDER_REMOVED_MEANWHILE = new Set(["ENOENT", "ENOTDIR"]);

/**
 * Moves a finished upload into place. A deletion of the folder it goes to (its library's, say) may
 * remove the folder just made: made again, the file lands, and the caller finds what it belonged to
 * gone and removes the file as it removes any refused upload's.
 */
async function renameIntoPlace(temp: string, target: string): Promise<void> {
  for (let tries = 1; ; tries++) {
    try {
      await mkdir(dirname(target), { recursive: true });
      await rename(temp, target);
      return;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "";
      if (!FOLDER_REMOVED_MEANWHILE.has(code) || tries >= PLACING_TRIES) throw error;
    }
  }
}

/** Blobs as files under `${dataDir}/blobs`; uploads land in `.tmp/` and are renamed into place. */
export class LocalBlobStore implements BlobStore {
  readonly #root: string;
  readonly #tmp: string;
  readonly #longestUploadMs: number;

  constructor(
    dataDir: string,
    options: {
      /** The longest an upload may take: its request or import has timed out by then. */
      longestUploadMs: number;
    },
  ) {
    this.#root = join(dataDir, "blobs");
    this.#tmp = join(this.#root, ".tmp");
    this.#longestUploadMs = options.longestUploadMs;
  }

  #path(key: string): string {
    assertBlobKey(key);
    return join(this.#root, ...key.split("/"));
  }

  async ready(): Promise<void> {
    try {
      makeDirectories(this.#tmp);
    } catch (error) {
      throw new Error(`cannot create the blob directory (CUMULO_DATA_DIR): ${(error as Error).message}`);
    }
    await this.#removeAbandonedTemporaries();
  }

  /**
   * A failed upload removes its temporary, but a killed process cannot. Another process on this data
   * dir may be writing one right now, so only those untouched for longer than an upload lasts go.
   */
  async #removeAbandonedTemporaries(): Promise<void> {
    // Against the file system's clock, which stamped the files, not the injectable one.
    const before = Date.now() - this.#longestUploadMs;
    for (const name of await readdir(this.#tmp)) {
      const path = join(this.#tmp, name);
      const found = await lstat(path).catch((error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT") return undefined; // renamed into place meanwhile
        throw error;
      });
      if (found && found.mtimeMs < before) await rm(path, { recursive: true, force: true });
    }
  }

  async put(key: string, body: Readable, options: { maxBytes: number }): Promise<StoredBlob> {
    const target = this.#path(key);
    // The body may fail while the folder is made, before `pipeline` listens: an error event nobody
    // listens to ends the process. `pipeline` still sees the stream's error and rejects.
    body.on("error", () => undefined);
    await mkdir(this.#tmp, { recursive: true });
    const temp = join(this.#tmp, randomUUID());
    const limit = new SizeLimit(options.maxBytes);
    const file = createWriteStream(temp, { flags: "wx" });
    try {
      await pipeline(body, limit, file);
      await renameIntoPlace(temp, target);
    } catch (error) {
      // A file stream destroyed while it was still opening creates its file afterwards, before it
      // closes: removed only once closed, the temp file is not left behind.
      if (!file.closed) await once(file, "close").catch(() => undefined);
      await rm(temp, { force: true });
      throw storeError(error);
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
    await rm(this.#path(key), { force: true }).catch(removalFailed);
  }

  async deletePrefix(prefix: string): Promise<void> {
    // A file stored under the prefix meanwhile (an upload racing the deletion) makes a directory
    // not empty when it is removed: tried again, as Node offers.
    await rm(this.#path(prefix), {
      recursive: true,
      force: true,
      maxRetries: REMOVAL_RETRIES,
      retryDelay: 20,
    }).catch(removalFailed);
  }
}
