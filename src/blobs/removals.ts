import type { FastifyBaseLogger } from "fastify";
import { type Clock, nowIso } from "../clock.ts";
import type { JobHandler, JobQueue } from "../jobs/queue.ts";
import type { JobRepository } from "../jobs/repository.ts";
import { MEDIA_PREFIX } from "../media/urls.ts";
import type { Executor, Transact } from "../store/transactions.ts";
import { assertBlobKey, type BlobStore, BlobStoreRefusedError, isStorageFailure } from "./store.ts";

export const REMOVE_FILES_JOB = "blobs.remove";

/** Blobs by key, and whole `prefix/` trees, whose rows are gone or replaced. */
export interface FilesToRemove {
  keys: string[];
  prefixes: string[];
}

/** A removal queued in the transaction of a change, to be carried out once that has committed. */
export interface QueuedRemoval {
  jobId: string;
  files: FilesToRemove;
}

/**
 * How long the node that queued a removal has it to itself: a worker takes it over after that, as
 * after the lease of a job whose worker died. Also the lease of a removal job, which lists and
 * deletes for as long as the files take.
 */
const REMOVAL_LEASE_MS = 10 * 60_000;

/** Within one library at most (`media/{library_id}` or below): a removal never reaches another's files. */
const WITHIN_ONE_LIBRARY = new RegExp(`^${MEDIA_PREFIX}/[^/]+(/|$)`);

export interface FileRemovalDeps {
  transact: Transact;
  blobs: BlobStore;
  jobs: JobQueue;
  jobRepository: JobRepository;
  clock: Clock;
  logger: FastifyBaseLogger;
}

/**
 * Removes the files of deleted or replaced items, durably. The removal is a job queued in the
 * transaction of the change, so it exists exactly when the change does; once that has committed the
 * node removes the files at once (the common case, as before) and marks the job done. If the store
 * fails meanwhile (a bucket in an outage) or the node dies, a worker carries the job out, retrying
 * for as long as the store is unavailable: files a customer deleted are not kept for ever. Files of
 * uploads refused after they were stored go the same way (`removeNow`).
 */
export class FileRemovals {
  constructor(private readonly deps: FileRemovalDeps) {}

  /** Queues the removal inside the transaction that deletes or replaces the rows naming the files. */
  async queue(trx: Executor, files: Partial<FilesToRemove>): Promise<QueuedRemoval | undefined> {
    const target = { keys: files.keys ?? [], prefixes: files.prefixes ?? [] };
    if (target.keys.length + target.prefixes.length === 0) return undefined;
    for (const key of [...target.keys, ...target.prefixes]) {
      assertBlobKey(key);
      if (!WITHIN_ONE_LIBRARY.test(key)) throw new Error(`Not a blob key within one library: ${key}`);
    }
    const jobId = await this.deps.jobs.enqueue(trx, REMOVE_FILES_JOB, target, { delayMs: REMOVAL_LEASE_MS });
    return { jobId, files: target };
  }

  /**
   * After the commit: removes the files now. When that fails, a worker takes the job over at once.
   * Never throws: the change has committed, so failing its answer would tell the client it did not.
   */
  async carryOut(removal: QueuedRemoval | undefined): Promise<void> {
    if (!removal) return;
    const { jobs, jobRepository, clock, logger } = this.deps;
    const { jobId, files } = removal;
    // Not claimed by any run yet: if a worker has taken it meanwhile, its outcome is the worker's.
    const run = { id: jobId, attempt: 0 };
    const bookkeepingFailed = (error: unknown) =>
      logger.warn({ err: error, jobId }, "removal job not updated; it runs again after its lease");
    try {
      await this.#remove(files);
    } catch (error) {
      // Counts only: a folder of thousands of videos names thousands of prefixes (the job has them).
      logger.warn(
        { err: error, jobId, keys: files.keys.length, prefixes: files.prefixes.length },
        "files of a deleted, replaced or refused item not removed yet; a worker retries",
      );
      const message = error instanceof Error ? error.message : String(error);
      await jobRepository.reschedule(run, nowIso(clock), message, nowIso(clock)).catch(bookkeepingFailed);
      jobs.notify();
      return;
    }
    await jobRepository.complete(run, nowIso(clock)).catch(bookkeepingFailed);
  }

  /**
   * Queues and carries out a removal of files that no change of rows covers: a job's own output, or
   * an upload refused after its bytes were stored.
   */
  async removeNow(files: Partial<FilesToRemove>): Promise<void> {
    await this.carryOut(await this.deps.transact((trx) => this.queue(trx, files)));
  }

  handler(): JobHandler<FilesToRemove> {
    return {
      kind: REMOVE_FILES_JOB,
      leaseMs: REMOVAL_LEASE_MS,
      handle: (files) => this.#remove(files),
      // Removing what was deleted is never given up while the store is away. A store that refuses
      // (a bucket policy without `s3:DeleteObject`, a bucket gone) would refuse for ever: that and
      // other failures spend the job's attempts, and the failed job keeps the files to remove.
      isTransient: (error) => isStorageFailure(error) && !(error instanceof BlobStoreRefusedError),
      transientPatienceMs: Number.POSITIVE_INFINITY,
      onGiveUp: async (files, error) => {
        // The runner's warning just before names the job.
        this.deps.logger.error(
          { error, keys: files.keys.length, prefixes: files.prefixes.length },
          "removal job failed: the files its payload names stay in media storage",
        );
      },
    };
  }

  /** Stops at the first failure: a store that is away fails every other one too. Repeatable. */
  async #remove({ keys, prefixes }: FilesToRemove): Promise<void> {
    for (const key of keys) await this.deps.blobs.delete(key);
    for (const prefix of prefixes) await this.deps.blobs.deletePrefix(prefix);
  }
}
