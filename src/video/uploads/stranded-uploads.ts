import type { FastifyBaseLogger } from "fastify";
import { STORAGE_RETRY_AFTER_S } from "../../blobs/store.ts";
import type { BackgroundWorker } from "../../services.ts";
import type { ResumableUploads } from "./tus.ts";

/** As often as a client is told to come back after a 503 for unavailable storage. */
const PASS_INTERVAL_MS = STORAGE_RETRY_AFTER_S * 1000;

/**
 * Runs on every API node (the holder of its uploads' bytes): at start, for uploads whose move the
 * last process never began, and then every few seconds, for those whose move failed, finishes the
 * resumable uploads that hold all their bytes.
 */
export class StrandedUploadFinisher implements BackgroundWorker {
  readonly name = "stranded resumable uploads";
  #timer: NodeJS.Timeout | undefined;
  #pass: Promise<void> | undefined;

  constructor(
    private readonly uploads: ResumableUploads,
    private readonly logger: FastifyBaseLogger,
    private readonly intervalMs = PASS_INTERVAL_MS,
  ) {}

  async start(): Promise<void> {
    this.#timer = setInterval(() => this.#passInBackground(), this.intervalMs);
    this.#timer.unref();
    this.#passInBackground();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#pass;
  }

  #passInBackground(): void {
    this.#pass ??= this.uploads
      .finishStrandedUploads()
      .then((finished) => {
        if (finished > 0) this.logger.info({ finished }, "finished resumable uploads left stranded");
      })
      .catch((error: unknown) => this.logger.warn({ err: error }, "finishing stranded uploads failed"))
      .finally(() => {
        this.#pass = undefined;
      });
  }
}
