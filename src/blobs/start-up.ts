import type { FastifyBaseLogger } from "fastify";
import { type BlobStore, BlobStoreUnavailableError } from "./store.ts";

/**
 * Checks the blob store before a node starts. Settings it refuses stop the node (thrown). A store
 * that is only away (an S3 service starting with the node, or back from a power cut) does not: the
 * node serves what needs no files and answers 503 for the rest, and checks the store in the
 * background until it answers (every `recheckMs`, CUMULO_STORAGE_RECHECK_MS), which it logs once.
 * Returns what stops that checking.
 */
export async function checkStorageAtStart(
  blobs: BlobStore,
  logger: FastifyBaseLogger,
  recheckMs: number,
): Promise<() => void> {
  try {
    await blobs.ready();
    return () => undefined;
  } catch (error) {
    if (!(error instanceof BlobStoreUnavailableError)) throw error;
    logger.warn({ err: error }, "media storage unavailable at start; starting without it");
  }
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let refusalLogged = false;
  const check = async () => {
    try {
      await blobs.ready();
      if (!stopped) logger.info("media storage available again");
      return;
    } catch (error) {
      // The service is back but refuses this node (its user or bucket went missing meanwhile).
      if (!(error instanceof BlobStoreUnavailableError) && !refusalLogged) {
        refusalLogged = true;
        logger.error({ err: error }, "media storage refuses this node's settings");
      }
    }
    if (!stopped) timer = setTimeout(check, recheckMs).unref();
  };
  timer = setTimeout(check, recheckMs).unref();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
