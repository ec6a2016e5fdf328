import type { Readable } from "node:stream";

/** A stream went past the size allowed for it; the partial upload is discarded. Routes answer 413. */
export class BlobTooLargeError extends Error {
  constructor(readonly limitBytes: number) {
    super(`Blob exceeds ${limitBytes} bytes`);
    this.name = "BlobTooLargeError";
  }
}

/**
 * The store itself failed (a bucket that does not answer, or refuses the node: `BlobStoreRefusedError`;
 * a full or read-only disk): the request was fine and can be tried again later. The API answers 503. The
 * message names no address or path (it may reach a customer as a failure reason); logs show the cause.
 */
export class BlobStoreUnavailableError extends Error {
  constructor(cause: unknown, message = "media storage unavailable") {
    super(message, { cause });
    this.name = "BlobStoreUnavailableError";
  }
}

/**
 * The store answered and refused the node (access denied, no such bucket, unknown credentials; a
 * disk's file permissions): its settings or permissions must be fixed, so waiting alone does not
 * help. To a client it is the same 503 as an outage; a removal spends its attempts on it instead of
 * waiting for ever. `reason` is the store's answer (`AccessDenied (HTTP 403)`, `EACCES`), which
 * names no address or path.
 */
export class BlobStoreRefusedError extends BlobStoreUnavailableError {
  constructor(cause: unknown, reason: string) {
    super(cause, `media storage refused the request: ${reason}`);
    this.name = "BlobStoreRefusedError";
  }
}

/** A disk full or read-only, or a process out of file descriptors: states that end by themselves or by an operator freeing room. */
const DISK_UNAVAILABLE = ["ENOSPC", "EDQUOT", "EROFS", "EMFILE", "ENFILE"];

/** The disk's own failures, as opposed to a source's (a client that hung up). */
const STORAGE_FAULTS = new Set([...DISK_UNAVAILABLE, "EIO", "EACCES", "EPERM"]);

const errnoOf = (error: unknown): string => (error as NodeJS.ErrnoException | null)?.code ?? "";

/** A file system error of the disk itself (full, read-only, failing): nothing the request did. */
export const isStorageFault = (error: unknown): boolean => STORAGE_FAULTS.has(errnoOf(error));

/**
 * Of the storage faults, those of a disk full or read-only (or no descriptors left); a permission
 * refused or an I/O error is not among them (a misconfiguration, a failing disk).
 */
export const isDiskUnavailable = (error: unknown): boolean => DISK_UNAVAILABLE.includes(errnoOf(error));

/** Media storage failed, not the work that used it: a job that meets this waits for the storage. */
export const isStorageFailure = (error: unknown): boolean =>
  error instanceof BlobStoreUnavailableError || isStorageFault(error);

/** What a 503 for unavailable storage tells clients: wait this many seconds, and why. */
export const STORAGE_RETRY_AFTER_S = 10;
export const STORAGE_UNAVAILABLE_MESSAGE = "Media storage is unavailable; try again shortly";

export interface StoredBlob {
  key: string;
  sizeBytes: number;
}

/**
 * Where uploaded and generated media files live. Keys are chosen by the server (ids, never a user's
 * file name): lower-case segments of `[a-z0-9._-]` joined by `/`. Media keeps every file of a video
 * under `media/{library_id}/{video_id}/`, so a whole video or library is removed by prefix.
 */
export interface BlobStore {
  /**
   * Checks that the store can be used: throws `BlobStoreUnavailableError` when it is only away for
   * now (a node then starts without it), any other error (one line naming the setting) when its
   * settings are wrong, and a node refuses to start.
   */
  ready(): Promise<void>;
  /**
   * Streams `body` into `key`. The size limit is enforced while streaming: past `maxBytes` the write
   * stops and `BlobTooLargeError` is thrown. The blob appears only once complete (atomic rename).
   */
  put(key: string, body: Readable, options: { maxBytes: number }): Promise<StoredBlob>;
  /** The blob's bytes, or only `start`..`end` (inclusive) of them. */
  open(key: string, range?: { start: number; end: number }): Readable;
  /** Size and last change of a blob, or undefined when there is none. */
  stat(key: string): Promise<{ sizeBytes: number; modifiedAt: Date } | undefined>;
  exists(key: string): Promise<boolean>;
  /** Removes one blob; a missing blob is not an error. */
  delete(key: string): Promise<void>;
  /** Removes every blob whose key starts with `prefix/`. */
  deletePrefix(prefix: string): Promise<void>;
}

const KEY = /^[a-z0-9][a-z0-9._-]*(\/[a-z0-9][a-z0-9._-]*)*$/;

/** Rejects keys that could leave the store's root (`..`, absolute paths, odd characters). */
export function assertBlobKey(key: string): void {
  if (!KEY.test(key) || key.split("/").some((segment) => segment === ".." || segment === ".")) {
    throw new Error(`Invalid blob key: ${key}`);
  }
}
