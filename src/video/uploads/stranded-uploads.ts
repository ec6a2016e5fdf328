import type { FastifyBaseLogger } from "fastify";
import { STORAGE_RETRY_AFTER_S } from "../../blobs/store.ts";
import { PeriodicWorker } from "../../ops/periodic.ts";
import type { ResumableUploads } from "./tus.ts";

/** By default as often as a client is told to come back after a 503 for unavailable storage. */
const PASS_INTERVAL_MS = STORAGE_RETRY_AFTER_S * 1000;

/**
 * Runs on every API node (the holder of its uploads' bytes): at start, for uploads whose move the
 * last process never began, and then every few seconds, for those whose move failed, finishes the
 * resumable uploads that hold all their bytes.
 */
export class StrandedUploadFinisher extends PeriodicWorker {
  readonly name = "stranded resumable uploads";

  constructor(
    private readonly uploads: ResumableUploads,
    private readonly logger: FastifyBaseLogger,
    intervalMs = PASS_INTERVAL_MS,
  ) {
    super(intervalMs);
  }

  protected async pass(): Promise<void> {
    try {
      const finished = await this.uploads.finishStrandedUploads();
      if (finished > 0) this.logger.info({ finished }, "finished resumable uploads left stranded");
    } catch (error) {
      this.logger.warn({ err: error }, "finishing stranded uploads failed");
    }
  }
}
