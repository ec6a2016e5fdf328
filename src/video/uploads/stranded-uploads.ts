import type { FastifyBaseLogger } from "fastify";
import { PeriodicWorker } from "../../ops/periodic.ts";
import type { ResumableUploads } from "./tus.ts";

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
    /** CUMULO_STORAGE_RECHECK_MS: by default as often as a 503's `Retry-After` asks clients back. */
    intervalMs: number,
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
