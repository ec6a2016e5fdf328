import { randomUUID } from "node:crypto";
import { Transform, type TransformCallback } from "node:stream";
import ipaddr from "ipaddr.js";
import { type Agent, request } from "undici";
import { BlobStoreUnavailableError, BlobTooLargeError, type StoredBlob } from "../../blobs/store.ts";
import { nowIso } from "../../clock.ts";
import type { Config } from "../../config.ts";
import type { FieldError } from "../../http/errors.ts";
import type { JobContext, JobHandler } from "../../jobs/queue.ts";
import { toVideoEventData } from "../../media/presenters.ts";
import {
  assertTargetAllowed,
  BlockedAddressError,
  checkUrlTarget,
  createGuardedAgent,
  type PrivateAccess,
} from "../../net/address-guard.ts";
import { sourceKey } from "../pipeline.ts";
import type { UploadDeps } from "./index.ts";
import type { ImportStatus, VideoImportRow } from "./tables.ts";

export const IMPORT_JOB = "video.import";
const IMPORT_LEASE_MS = 30_000;
const HEARTBEAT_MS = 5_000;
const IMPORT_ATTEMPTS = 3;
const MAX_REDIRECTS = 5;
const MAX_URL_LENGTH = 2048;
/** Progress is written to the store at most this often while bytes arrive. */
const PROGRESS_EVERY_MS = 1_000;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

export interface ImportPayload {
  libraryId: string;
  videoId: string;
  importId: string;
  /** The video's source generation when the import was asked for (absent in jobs queued before it was kept). */
  generation?: number;
}

export interface ImportView {
  video_id: string;
  url: string;
  status: ImportStatus;
  bytes_received: number;
  content_length: number | null;
  failure_reason: string | null;
  created_at: string;
  updated_at: string;
}

export type ImportOutcome =
  | { outcome: "accepted"; import: ImportView }
  | { outcome: "not_found" }
  | { outcome: "invalid"; errors: FieldError[] };

/** A download that cannot succeed by trying again (refused address, 4xx, too large): final at once. */
class ImportRefused extends Error {}

const SUPERSEDED_REASON = "the video got a newer source (an upload) while this import was under way";

/**
 * What one download attempt has received, and why it was stopped early: its import was `replaced`
 * by a newer one, or the video was given a newer source (`superseded`). Either way the rest of the
 * file is not wanted, so the download ends at the next progress report instead of running to the end.
 */
interface DownloadProgress {
  bytes: number;
  stopped?: "replaced" | "superseded";
}

const toImportView = (row: VideoImportRow): ImportView => ({
  video_id: row.video_id,
  url: row.url,
  status: row.status,
  bytes_received: Number(row.bytes_received),
  content_length: row.content_length === null ? null : Number(row.content_length),
  failure_reason: row.failure_reason,
  created_at: row.created_at,
  updated_at: row.updated_at,
});

/** The refusal of the address guard, whether undici hands it over directly or as the cause. */
const blockedAddress = (error: unknown): BlockedAddressError | undefined => {
  if (error instanceof BlockedAddressError) return error;
  const cause = (error as { cause?: unknown } | undefined)?.cause;
  return cause instanceof BlockedAddressError ? cause : undefined;
};

/** Which non-public addresses imports may reach: all, none, or the configured addresses and ranges. */
function importAccess(settings: Config["uploads"]): PrivateAccess {
  if (settings.importAllowPrivate) return true;
  if (settings.importAllowAddresses.length === 0) return false;
  const ranges = settings.importAllowAddresses.map((range) =>
    range.includes("/")
      ? ipaddr.parseCIDR(range)
      : ipaddr.parseCIDR(`${range}/${ipaddr.parse(range).kind() === "ipv4" ? 32 : 128}`),
  );
  return (address) => {
    if (!ipaddr.isValid(address)) return false;
    const parsed = ipaddr.process(address);
    return ranges.some(([network, bits]) => network.kind() === parsed.kind() && parsed.match(network, bits));
  };
}

/** Lets go of an answer's body we do not want (undici reads a little of it, then closes). */
const discard = (body: { dump(): Promise<void> }): Promise<void> => body.dump().catch(() => undefined);

/** Counts the bytes passing through and reports them. */
class ByteCounter extends Transform {
  bytes = 0;

  constructor(private readonly onBytes: (bytes: number) => void) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    this.onBytes(this.bytes);
    callback(null, chunk);
  }
}

/** What an upload service has, and the User-Agent sent with source downloads. */
export type UrlImportDeps = UploadDeps & { userAgent: string };

/**
 * Sets a video's source from an http(s) URL: a durable job downloads it through the SSRF-guarded
 * agent (every redirect hop checked; connections go only to checked addresses) with a size limit and
 * timeouts, then hands it to the pipeline exactly as a one-request upload (ffprobe checks the content).
 */
export class UrlImports {
  readonly #agent: Agent;
  readonly #access: PrivateAccess;

  constructor(private readonly deps: UrlImportDeps) {
    this.#access = importAccess(deps.config.uploads);
    this.#agent = createGuardedAgent({
      allowPrivate: this.#access,
      connectTimeoutMs: deps.config.uploads.importIdleTimeoutMs,
    });
  }

  async request(
    organizationId: string,
    libraryId: string,
    videoId: string,
    url: string,
  ): Promise<ImportOutcome> {
    const errors = await this.#checkUrl(url);
    if (errors.length > 0) return { outcome: "invalid", errors };
    const { transact, videos, repository, jobs, clock, pipeline } = this.deps;
    const row = await transact(async (trx) => {
      // Locked, so that a source accepted at the same moment counts as before or after this request.
      const video = await videos.lock(trx, libraryId, videoId);
      if (!video || video.organization_id !== organizationId) return undefined;
      const generation = await pipeline.sourceGeneration(video.id, trx);
      const now = nowIso(clock);
      const created: VideoImportRow = {
        video_id: videoId,
        id: randomUUID(),
        organization_id: organizationId,
        library_id: libraryId,
        url,
        status: "queued",
        bytes_received: 0,
        content_length: null,
        failure_reason: null,
        created_at: now,
        updated_at: now,
      };
      await repository.putImport(trx, created);
      const payload: ImportPayload = { libraryId, videoId, importId: created.id, generation };
      await jobs.enqueue(trx, IMPORT_JOB, payload, { maxAttempts: IMPORT_ATTEMPTS });
      return created;
    });
    if (!row) return { outcome: "not_found" };
    jobs.notify();
    return { outcome: "accepted", import: toImportView(row) };
  }

  /** The video's latest import, when the video is the organization's. */
  async find(organizationId: string, libraryId: string, videoId: string): Promise<ImportView | undefined> {
    const row = await this.deps.repository.findImport(videoId);
    if (!row || row.organization_id !== organizationId || row.library_id !== libraryId) return undefined;
    return toImportView(row);
  }

  async #checkUrl(url: string): Promise<FieldError[]> {
    // A length is `validation_max`, as a webhook URL's is (CONTRACT 4).
    if (url.length > MAX_URL_LENGTH) {
      const message = `The url field must be at most ${MAX_URL_LENGTH} characters long.`;
      return [{ field: "url", code: "validation_max", message }];
    }
    const target = await checkUrlTarget(url, this.#access);
    if (target.outcome === "public") return [];
    const message =
      target.outcome === "not_http"
        ? "The url field must be an http or https URL."
        : `The url field must reach a public address: ${target.reason}.`;
    return [{ field: "url", code: "validation_format", message }];
  }

  handler(): JobHandler<ImportPayload> {
    return {
      kind: IMPORT_JOB,
      leaseMs: IMPORT_LEASE_MS,
      handle: (payload, context) => this.run(payload, context),
      onGiveUp: (payload, error) => this.#fail(payload, `download failed: ${error}`),
      // The bucket in an outage fails no import: the download runs again once it answers.
      isTransient: (error) => error instanceof BlobStoreUnavailableError,
      failsOnCustomerInput: true,
    };
  }

  /** One download attempt; stops quietly when the import was replaced or the video deleted. */
  async run(payload: ImportPayload, context: JobContext): Promise<void> {
    const { repository, removals, videos, pipeline, logger } = this.deps;
    const current = await repository.findImport(payload.videoId);
    if (!current || current.id !== payload.importId) return;
    if (!(await this.#update(payload, { status: "downloading", bytes_received: 0 }))) return;
    const heartbeat = setInterval(() => {
      context.heartbeat().catch((error: unknown) => logger.warn({ err: error }, "import heartbeat failed"));
    }, HEARTBEAT_MS);
    let stored: StoredBlob;
    const progress: DownloadProgress = { bytes: 0 };
    try {
      stored = await this.#download(payload, current.url, progress);
    } catch (error) {
      if (progress.stopped === "replaced") return;
      if (progress.stopped === "superseded") {
        await this.#fail(payload, SUPERSEDED_REASON, progress.bytes);
        return;
      }
      const blocked = blockedAddress(error);
      if (error instanceof ImportRefused || blocked) {
        await this.#fail(payload, (blocked ?? (error as Error)).message, progress.bytes);
        return;
      }
      if (error instanceof BlobTooLargeError) {
        await this.#fail(
          payload,
          `the file is larger than ${this.deps.config.limits.videoSourceBytes} bytes`,
          progress.bytes,
        );
        return;
      }
      // Tried again, or given up on (`onGiveUp`): either way the import shows what this attempt got.
      await this.#update(payload, { bytes_received: progress.bytes }).catch(() => undefined);
      throw error;
    } finally {
      clearInterval(heartbeat);
    }
    const video = await videos.find(payload.libraryId, payload.videoId);
    const stillCurrent = (await repository.findImport(payload.videoId))?.id === payload.importId;
    if (!video || !stillCurrent) {
      await removals.removeNow({ keys: [stored.key] });
      return;
    }
    // A refused source's file is removed by `acceptSource`. An upload accepted after this import was
    // asked for is the newer source: the import does not replace it.
    const accepted = await pipeline.acceptSourceAskedAt(video, stored, payload.generation);
    if (accepted.outcome === "empty" || accepted.outcome === "superseded") {
      await this.#fail(payload, accepted.outcome === "empty" ? "the file is empty" : SUPERSEDED_REASON);
      return;
    }
    if (accepted.outcome === "not_found") return;
    // `stored` once the file is the video's source: processing has it from here.
    await this.#update(payload, { status: "stored", bytes_received: stored.sizeBytes });
  }

  /** The download, within CUMULO_IMPORT_TIMEOUT_S; running past it is final. */
  async #download(payload: ImportPayload, url: string, progress: DownloadProgress): Promise<StoredBlob> {
    const { importTimeoutMs } = this.deps.config.uploads;
    const signal = AbortSignal.timeout(importTimeoutMs);
    try {
      return await this.#downloadWithin(payload, url, signal, progress);
    } catch (error) {
      // Another attempt starts from the first byte again and takes as long: the limit is the whole import's.
      if (signal.aborted)
        throw new ImportRefused(`the download took longer than ${importTimeoutMs / 1000} s`);
      throw error;
    }
  }

  /** Follows redirects by hand, so every hop's address is checked, and streams the answer into the blob store. */
  async #downloadWithin(
    payload: ImportPayload,
    url: string,
    signal: AbortSignal,
    progress: DownloadProgress,
  ): Promise<StoredBlob> {
    const { config, blobs } = this.deps;
    const maxBytes = config.limits.videoSourceBytes;
    let target = new URL(url);
    for (let hop = 0; ; hop += 1) {
      if (target.protocol !== "http:" && target.protocol !== "https:") {
        throw new ImportRefused(`a redirect led to ${target.protocol}, not http or https`);
      }
      assertTargetAllowed(target, this.#access);
      const response = await request(target, {
        method: "GET",
        dispatcher: this.#agent,
        headers: { "user-agent": this.deps.userAgent, accept: "video/*, application/octet-stream, */*" },
        headersTimeout: config.uploads.importIdleTimeoutMs,
        bodyTimeout: config.uploads.importIdleTimeoutMs,
        signal,
      });
      const status = response.statusCode;
      if (REDIRECTS.has(status)) {
        await discard(response.body);
        const location = response.headers.location;
        const next = Array.isArray(location) ? location[0] : location;
        if (!next) throw new ImportRefused(`the URL answered ${status} without a Location`);
        if (hop >= MAX_REDIRECTS) throw new ImportRefused(`more than ${MAX_REDIRECTS} redirects`);
        target = new URL(next, target);
        continue;
      }
      if (status !== 200) {
        await discard(response.body);
        // An origin's own trouble may pass; anything else the URL says will not change.
        if (status >= 500 || status === 429) throw new Error(`the URL answered ${status}`);
        throw new ImportRefused(`the URL answered ${status}`);
      }
      const declared = Number(response.headers["content-length"] ?? Number.NaN);
      if (declared > maxBytes) {
        await discard(response.body);
        throw new ImportRefused(`the file is larger than ${maxBytes} bytes`);
      }
      const contentLength = Number.isFinite(declared) ? declared : null;
      await this.#update(payload, { content_length: contentLength });
      let reported = performance.now();
      const counter = new ByteCounter((bytes) => {
        progress.bytes = bytes;
        if (performance.now() - reported < PROGRESS_EVERY_MS) return;
        reported = performance.now();
        this.#reportProgress(payload, bytes).then(
          (stopped) => {
            if (!stopped || progress.stopped) return;
            progress.stopped = stopped;
            counter.destroy(new Error(`import ${stopped}`));
          },
          (error: unknown) => this.deps.logger.warn({ err: error }, "import progress not recorded"),
        );
      });
      response.body.once("error", (error) => counter.destroy(error));
      // A download ended early (stopped, too large, the store failing) lets go of its connection.
      counter.once("close", () => response.body.destroy());
      return blobs.put(
        sourceKey(payload.libraryId, payload.videoId, randomUUID()),
        response.body.pipe(counter),
        { maxBytes },
      );
    }
  }

  /** Records the bytes received; says whether the download should stop (see `DownloadProgress`). */
  async #reportProgress(payload: ImportPayload, bytes: number): Promise<DownloadProgress["stopped"]> {
    if (!(await this.#update(payload, { bytes_received: bytes }))) return "replaced";
    if (payload.generation === undefined) return undefined;
    const generation = await this.deps.pipeline.sourceGeneration(payload.videoId);
    return generation === payload.generation ? undefined : "superseded";
  }

  async #update(
    payload: ImportPayload,
    changes: { status?: ImportStatus; bytes_received?: number; content_length?: number | null },
  ): Promise<boolean> {
    const { repository, clock } = this.deps;
    return repository.updateImportIfCurrent(repository.db, payload.videoId, payload.importId, {
      ...changes,
      updated_at: nowIso(clock),
    });
  }

  /**
   * Records the failure on the import and, for a video that has no source yet (`created`), moves the
   * video to `failed` with its `failed` event, all in one transaction. A video that already has a
   * source keeps it (and its status); the reason is on the import, with the bytes the download got.
   */
  async #fail(payload: ImportPayload, reason: string, bytesReceived?: number): Promise<void> {
    const { transact, repository, videos, webhooks, clock } = this.deps;
    const emitted = await transact(async (trx) => {
      const now = nowIso(clock);
      const current = await repository.updateImportIfCurrent(trx, payload.videoId, payload.importId, {
        status: "failed",
        failure_reason: reason.slice(0, 1000),
        ...(bytesReceived === undefined ? {} : { bytes_received: bytesReceived }),
        updated_at: now,
      });
      if (!current) return false;
      const video = await videos.find(payload.libraryId, payload.videoId, trx);
      if (video?.status !== "created") return false;
      const update = { status: "failed" as const, updated_at: now };
      await videos.update(trx, video.id, update);
      await webhooks.emit(trx, {
        event: "failed",
        organizationId: video.organization_id,
        libraryId: video.library_id,
        videoId: video.id,
        data: toVideoEventData({ ...video, ...update }, this.deps.config),
      });
      return true;
    });
    if (emitted) webhooks.notify();
  }
}
