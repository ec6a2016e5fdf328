import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, readdir, rm } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { pipeline as streamPipeline } from "node:stream/promises";
import type { FastifyBaseLogger } from "fastify";
import type { FileRemovals } from "../blobs/removals.ts";
import { type BlobStore, isStorageFailure } from "../blobs/store.ts";
import { type Clock, nowIso } from "../clock.ts";
import type { Config } from "../config.ts";
import type { JobContext, JobHandler, JobQueue } from "../jobs/queue.ts";
import { toVideoEventData } from "../media/presenters.ts";
import type { VideoChanges, VideoRow, VideoStatus } from "../media/tables.ts";
import { videoAssetUrl, videoBlobPrefix } from "../media/urls.ts";
import type { VideoRepository } from "../media/video-repository.ts";
import type { Executor, Transact } from "../store/transactions.ts";
import type { WebhookEmitter } from "../webhooks/emitter.ts";
import {
  MediaToolError,
  type ProbeResult,
  ScratchDiskError,
  ToolStartError,
  ToolsCancelledError,
} from "./media-tools.ts";
import type { VideoProcessingRepository } from "./repository.ts";
import type { NewProcessingRow, ProcessingChanges, ProcessingRow } from "./tables.ts";
import {
  MASTER_PLAYLIST,
  MP4_FILE,
  PREVIEW_FILE,
  THUMBNAIL_FILE,
  type Transcoded,
  type Transcoder,
} from "./transcoder.ts";

export type SourceOutcome = { outcome: "accepted"; video: VideoRow } | { outcome: "not_found" | "empty" };
/** Also `superseded`: another source was accepted after this one was asked for. */
export type AskedSourceOutcome = SourceOutcome | { outcome: "superseded" };

export const PROCESS_JOB = "video.process";
/** A processing job is ours for this long without a heartbeat; a dead worker's job is taken over after it. */
export const PROCESS_LEASE_MS = 10_000;
const HEARTBEAT_MS = 2_500;
const PROCESS_ATTEMPTS = 3;

/** Where a worker's processing runs keep their files (a folder per attempt). */
export const videoWorkRoot = (dataDir: string): string => join(dataDir, "video-work");
/** How much shorter than its header says a video must play to be taken as truncated. */
const TRUNCATION_SLACK_S = 1;

/** Forward order of the statuses; a stage is announced only when the video moves past its current one. */
const ORDER: VideoStatus[] = ["created", "uploading", "processing", "transcoding", "packaging", "ready"];
const rank = (status: VideoStatus) => ORDER.indexOf(status);

export interface ProcessPayload {
  libraryId: string;
  videoId: string;
  generation: number;
}

/** Blob prefix of the renditions and pictures of one upload of a video. */
export const renditionPrefix = (libraryId: string, videoId: string, generation: number): string =>
  `${videoBlobPrefix(libraryId, videoId)}/renditions/${generation}`;

export const sourceKey = (libraryId: string, videoId: string, id: string): string =>
  `${videoBlobPrefix(libraryId, videoId)}/source/${id}`;

/** Generated thumbnails: one per started 2 seconds of video, at least 1 and at most 5. */
export const thumbnailCountFor = (durationS: number): number =>
  Math.min(5, Math.max(1, Math.ceil(durationS / 2)));

export interface PipelineDeps {
  transact: Transact;
  config: Config;
  clock: Clock;
  blobs: BlobStore;
  removals: FileRemovals;
  jobs: JobQueue;
  webhooks: WebhookEmitter;
  videos: VideoRepository;
  processing: VideoProcessingRepository;
  transcoder: Transcoder;
  logger: FastifyBaseLogger;
  /** Ends the ffmpeg runs in hand (the worker is stopping). */
  stopTools?: () => void;
}

async function filesUnder(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
}

/**
 * Takes uploaded sources and turns them into playable renditions: `uploading -> processing ->
 * transcoding -> packaging -> ready` (or `failed`). Each status change and its webhook notification are
 * one transaction, so receivers hear the stages in order.
 */
/** Fail the video with a reason, or stop its processing where it is (it stays at that stage). */
export type InjectedVideoFault = { fail: string } | { stop: true };

/**
 * Developer mode's state transitions: a ready-made output (renditions, master playlist, MP4 and
 * pictures, with the probe of the source it was made from) stands in for ffmpeg's, and processing
 * may stop at a stage (the video stays there).
 */
export interface VideoTransition {
  placeholder: () => Promise<{ directory: string; probe: ProbeResult; timelineStartPts: number | undefined }>;
  stopAt?: "processing" | "transcoding" | "packaging";
}

export class VideoPipeline {
  /** Developer mode's fault rules: a reason here fails the video at that stage. */
  injectFault:
    | ((payload: ProcessPayload, stage: "transcoding" | "packaging") => InjectedVideoFault | undefined)
    | undefined;

  /** Developer mode's state transitions of the organization's videos; none: real processing. */
  transition: ((organizationId: string) => VideoTransition | undefined) | undefined;

  constructor(private readonly deps: PipelineDeps) {}

  /** Where an uploaded source of the video is stored. */
  sourceKey(video: VideoRow): string {
    return sourceKey(video.library_id, video.id, randomUUID());
  }

  /**
   * Makes a stored upload the video's source: a new generation, status `uploading` (announced), the
   * processing job queued, all in one transaction. The previous source and renditions are removed
   * after commit. An empty upload, or one for a video deleted meanwhile, is removed (durably) and refused.
   */
  acceptSource(video: VideoRow, upload: { key: string; sizeBytes: number }): Promise<SourceOutcome> {
    // Never `superseded`: that needs the generation it was asked at.
    return this.#acceptOrRemove(video, upload) as Promise<SourceOutcome>;
  }

  /**
   * `acceptSource` for a source asked for when the video was at `generation` (a URL import, which
   * arrives long after it was asked for): `superseded`, and removed, when another source was
   * accepted since, so an older request never replaces a newer upload. Without a generation (a job
   * queued before imports kept it), as `acceptSource`.
   */
  acceptSourceAskedAt(
    video: VideoRow,
    upload: { key: string; sizeBytes: number },
    generation: number | undefined,
  ): Promise<AskedSourceOutcome> {
    return this.#acceptOrRemove(video, upload, generation);
  }

  async #acceptOrRemove(
    video: VideoRow,
    upload: { key: string; sizeBytes: number },
    askedAt?: number,
  ): Promise<AskedSourceOutcome> {
    let result: AskedSourceOutcome | undefined;
    try {
      result = upload.sizeBytes === 0 ? { outcome: "empty" } : await this.#accept(video, upload, askedAt);
      return result;
    } finally {
      if (result?.outcome !== "accepted") await this.deps.removals.removeNow({ keys: [upload.key] });
    }
  }

  async #accept(
    video: VideoRow,
    upload: { key: string; sizeBytes: number },
    askedAt?: number,
  ): Promise<AskedSourceOutcome> {
    const { transact, videos, processing, webhooks, jobs, clock, removals } = this.deps;
    const result = await transact(async (trx) => {
      // Locked, so a deletion of the video (or its library) cannot remove it under the new source.
      const current = await videos.lock(trx, video.library_id, video.id);
      if (!current) return "not_found" as const;
      const previous = await processing.find(video.id, trx);
      if (askedAt !== undefined && (previous?.generation ?? 0) !== askedAt) return "superseded" as const;
      const generation = (previous?.generation ?? 0) + 1;
      const now = nowIso(clock);
      const row: NewProcessingRow = {
        video_id: video.id,
        organization_id: video.organization_id,
        library_id: video.library_id,
        generation,
        source_key: upload.key,
        source_bytes: upload.sizeBytes,
        duration_s: 0,
        has_audio: false,
        thumbnail_count: 0,
        failure_reason: null,
        created_at: previous?.created_at ?? now,
        updated_at: now,
      };
      if (previous) await processing.replace(trx, video.id, row);
      else await processing.insert(trx, row);
      const uploadedThumbnail = await videos.latestThumbnail(video.id, trx);
      const changes = {
        status: "uploading" as const,
        duration: 0,
        manifest_url: "",
        direct_play_url: "",
        preview_animation_thumbnail_url: "",
        thumbnail_count: 0,
        thumbnail_url: uploadedThumbnail ? current.thumbnail_url : "",
        updated_at: now,
      };
      await videos.update(trx, video.id, changes);
      const updated = { ...current, ...changes };
      await webhooks.emit(trx, {
        event: "uploading",
        organizationId: updated.organization_id,
        libraryId: updated.library_id,
        videoId: updated.id,
        data: toVideoEventData(updated, this.deps.config),
      });
      const payload: ProcessPayload = { libraryId: video.library_id, videoId: video.id, generation };
      await jobs.enqueue(trx, PROCESS_JOB, payload, { maxAttempts: PROCESS_ATTEMPTS });
      const replaced =
        previous &&
        (await removals.queue(trx, {
          keys: [previous.source_key],
          prefixes: [renditionPrefix(video.library_id, video.id, previous.generation)],
        }));
      return { updated, replaced };
    });
    if (typeof result === "string") return { outcome: result };
    webhooks.notify();
    jobs.notify();
    await removals.carryOut(result.replaced);
    return { outcome: "accepted", video: result.updated };
  }

  /** The processing row of the video's current source (none before the first upload). */
  processingOf(video: VideoRow, executor?: Executor): Promise<ProcessingRow | undefined> {
    return this.deps.processing.find(video.id, executor);
  }

  /** How many sources the video has been given so far (0 before the first). */
  async sourceGeneration(videoId: string, executor?: Executor): Promise<number> {
    return (await this.deps.processing.find(videoId, executor))?.generation ?? 0;
  }

  handler(): JobHandler<ProcessPayload> {
    return {
      kind: PROCESS_JOB,
      leaseMs: PROCESS_LEASE_MS,
      // More videos in hand than ffmpeg slots would only wait, and hold up quick jobs (provisioning).
      concurrency: this.deps.config.video.ffmpegConcurrency,
      handle: (payload, context) => this.process(payload, context),
      onGiveUp: async (payload, error) => {
        await this.fail(payload, `processing failed: ${error}`);
      },
      stop: () => this.deps.stopTools?.(),
      // A bucket in an outage, or this node's scratch disk full (for Node or for ffmpeg), fails no
      // video: processing goes on once storage answers again.
      isTransient: (error) =>
        isStorageFailure(error) || error instanceof ScratchDiskError || error instanceof ToolStartError,
    };
  }

  /** One processing run of one upload; stops quietly when the upload was replaced or the video deleted. */
  async process(payload: ProcessPayload, context: JobContext): Promise<void> {
    const { processing, blobs, removals, transcoder, config, logger } = this.deps;
    const current = await processing.find(payload.videoId);
    if (!current || current.generation !== payload.generation) return;

    // A video deleted, or given a newer source, while ffmpeg works on it: the run is ended, not
    // finished (it held an ffmpeg slot for minutes, every other video of the node waiting; QA of
    // 4 December). So is a run whose lease ran out (its process stalled past PROCESS_LEASE_MS) and
    // whose job another run took: two encodes of one video ran, the later removing the earlier's
    // folder under its ffmpeg (QA of 6 December). Found at the next heartbeat, within HEARTBEAT_MS.
    const unwanted = new AbortController();
    const heartbeat = setInterval(() => {
      context
        .heartbeat()
        .then((ours) => {
          if (!ours) unwanted.abort();
        })
        .catch((error: unknown) => logger.warn({ err: error }, "video job heartbeat failed"));
      processing
        .find(payload.videoId)
        .then((now) => {
          if (now?.generation !== payload.generation) unwanted.abort();
        })
        .catch((error: unknown) => logger.warn({ err: error }, "video job could not check its video"));
    }, HEARTBEAT_MS);
    const workRoot = videoWorkRoot(config.dataDir);
    const work = join(workRoot, `${payload.videoId}-${context.jobId}-${context.attempt}`);
    const prefix = renditionPrefix(payload.libraryId, payload.videoId, payload.generation);
    try {
      // Left-overs of an earlier attempt of this video (its worker died) go first.
      for (const name of await readdir(workRoot).catch(() => [] as string[])) {
        if (name.startsWith(`${payload.videoId}-`))
          await rm(join(workRoot, name), { recursive: true, force: true });
      }
      if (!(await this.advance(payload, "processing"))) return;
      const transition = this.transition?.(current.organization_id);
      if (transition?.stopAt === "processing") return;
      let source: string | undefined;
      let out: string;
      let probe: ProbeResult;
      let timelineStartPts: number | undefined;
      if (transition) {
        // Developer mode: the placeholder's files, the source is not read.
        ({ directory: out, probe, timelineStartPts } = await transition.placeholder());
      } else {
        await mkdir(work, { recursive: true });
        source = join(work, "source");
        await streamPipeline(blobs.open(current.source_key), createWriteStream(source));
        probe = await transcoder.probe(source);
        out = join(work, "out");
      }
      let duration = Math.round(probe.durationS);
      if (
        !(await this.advance(
          payload,
          "transcoding",
          { duration },
          { duration_s: probe.durationS, has_audio: probe.audioTracks.length > 0 },
        ))
      )
        return;
      if (transition?.stopAt === "transcoding") return;
      if (await this.#failInjected(payload, "transcoding")) return;
      const thumbnailCount = thumbnailCountFor(probe.durationS);
      let made: Transcoded | undefined;
      let durationS = probe.durationS;
      if (source) {
        made = await transcoder.transcode(source, out, probe, thumbnailCount, unwanted.signal);
        if (made.tracksLeftOut !== undefined) {
          logger.warn(
            { videoId: payload.videoId, reason: made.tracksLeftOut.replaceAll(`${work}${sep}`, "") },
            "video processed again with fewer audio tracks: the run with them all failed",
          );
        }
        timelineStartPts = made.timelineStartPts;
        durationS = made.durationS;
        // A truncated source's header names more than its data holds: the video is as long as it plays.
        if (made.playableS + TRUNCATION_SLACK_S < durationS) durationS = made.playableS;
        duration = Math.round(durationS);
      }

      if (unwanted.signal.aborted || !(await this.advance(payload, "packaging"))) return;
      if (transition?.stopAt === "packaging") return;
      if (await this.#failInjected(payload, "packaging")) return;
      if (made) await transcoder.package(out, made.renditions, made.audio);
      for (const file of await filesUnder(out)) {
        const key = `${prefix}/${relative(out, file).split(sep).join("/")}`;
        await blobs.put(key, createReadStream(file), { maxBytes: Number.MAX_SAFE_INTEGER });
      }

      if (unwanted.signal.aborted) return;
      const url = (file: string) => videoAssetUrl(config, payload.libraryId, payload.videoId, file);
      const ready = await this.advance(
        payload,
        "ready",
        {
          duration,
          manifest_url: url(MASTER_PLAYLIST),
          direct_play_url: url(MP4_FILE),
          preview_animation_thumbnail_url: url(PREVIEW_FILE),
          thumbnail_url: url(THUMBNAIL_FILE),
          thumbnail_count: thumbnailCount,
        },
        {
          thumbnail_count: thumbnailCount,
          duration_s: durationS,
          timeline_start_pts: timelineStartPts ?? null,
          // A second run may have been made without a track that carried nothing.
          ...(made ? { has_audio: made.audio.lead !== undefined } : {}),
        },
      );
      if (!ready) await removals.removeNow({ prefixes: [prefix] });
    } catch (error) {
      // Its video is gone or has a newer source: nothing of this run is wanted, and nothing is announced.
      if (error instanceof ToolsCancelledError) return;
      // ffmpeg failing because the run that took this job over removed its folder fails no video.
      if (unwanted.signal.aborted || !(await context.heartbeat())) return;
      if (error instanceof MediaToolError) {
        // The input is not a video ffmpeg can read (or took too long): final, not retried. ffmpeg
        // names its input by path: the attempt's folder is left out.
        await this.fail(payload, error.message.replaceAll(`${work}${sep}`, ""));
        await removals.removeNow({ prefixes: [prefix] });
        return;
      }
      throw error;
    } finally {
      clearInterval(heartbeat);
      await rm(work, { recursive: true, force: true });
    }
  }

  /**
   * Moves the video to `status` with `changes`, announcing it, in one transaction, while this upload
   * is still the video's current one. A stage the video already passed (a retried job) is not
   * announced again. False when the job should stop.
   */
  async advance(
    payload: ProcessPayload,
    status: VideoStatus,
    changes: VideoChanges = {},
    processingChanges: ProcessingChanges = {},
  ): Promise<boolean> {
    const { transact, videos, processing, webhooks, clock } = this.deps;
    const result = await transact(async (trx) => {
      const now = nowIso(clock);
      const current = await processing.updateIfCurrent(trx, payload.videoId, payload.generation, {
        ...processingChanges,
        updated_at: now,
      });
      if (!current) return { go: false, emitted: false };
      const video = await videos.find(payload.libraryId, payload.videoId, trx);
      if (!video || video.status === "failed") return { go: false, emitted: false };
      const forward = rank(status) > rank(video.status);
      const update = { ...changes, ...(forward ? { status } : {}), updated_at: now };
      await videos.update(trx, video.id, update);
      if (!forward) return { go: true, emitted: false };
      const updated = { ...video, ...update } as VideoRow;
      await webhooks.emit(trx, {
        event: status as "processing" | "transcoding" | "packaging" | "ready",
        organizationId: updated.organization_id,
        libraryId: updated.library_id,
        videoId: updated.id,
        data: toVideoEventData(updated, this.deps.config),
      });
      return { go: true, emitted: true };
    });
    if (result.emitted) webhooks.notify();
    return result.go;
  }

  async #failInjected(payload: ProcessPayload, stage: "transcoding" | "packaging"): Promise<boolean> {
    const fault = this.injectFault?.(payload, stage);
    if (fault && "fail" in fault) await this.fail(payload, fault.fail);
    return fault !== undefined;
  }

  /** Ends the current upload's processing as `failed` with a reason, announced in the same transaction. */
  async fail(payload: ProcessPayload, reason: string): Promise<void> {
    const { transact, videos, processing, webhooks, clock, config } = this.deps;
    // API callers read the reason (`/processing`): where the server keeps its files is no business of theirs.
    const shown = reason.replaceAll(`${config.dataDir}${sep}`, `<data>${sep}`).slice(0, 1000);
    const emitted = await transact(async (trx) => {
      const now = nowIso(clock);
      const current = await processing.updateIfCurrent(trx, payload.videoId, payload.generation, {
        failure_reason: shown,
        updated_at: now,
      });
      if (!current) return false;
      const video = await videos.find(payload.libraryId, payload.videoId, trx);
      if (!video || video.status === "failed" || video.status === "ready") return false;
      const update = { status: "failed" as const, updated_at: now };
      await videos.update(trx, video.id, update);
      const updated = { ...video, ...update };
      await webhooks.emit(trx, {
        event: "failed",
        organizationId: updated.organization_id,
        libraryId: updated.library_id,
        videoId: updated.id,
        data: toVideoEventData(updated, this.deps.config),
      });
      return true;
    });
    if (emitted) webhooks.notify();
  }
}
