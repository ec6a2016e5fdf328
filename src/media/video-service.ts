import { randomUUID } from "node:crypto";
import type { QueuedRemoval } from "../blobs/removals.ts";
import { nowIso } from "../clock.ts";
import type { Page } from "../http/pagination.ts";
import type { Executor } from "../store/transactions.ts";
import type { MediaDeps } from "./context.ts";
import { toVideoEventData } from "./presenters.ts";
import type { CreateVideoInput, UpdateVideoInput } from "./schemas.ts";
import type { LibraryRow, VideoRow, VideoStatus } from "./tables.ts";
import { videoBlobPrefix } from "./urls.ts";

export type VideoOutcome =
  | { outcome: "created" | "updated"; video: VideoRow }
  | { outcome: "not_found" | "folder_not_found" };

/** The status of a video that exists but has no source yet (the upload moves it to `uploading`). */
export const INITIAL_VIDEO_STATUS: VideoStatus = "created";

export class VideoService {
  constructor(private readonly deps: MediaDeps) {}

  find(libraryId: string, id: string): Promise<VideoRow | undefined> {
    return this.deps.videos.find(libraryId, id);
  }

  list(libraryId: string, filters: { folderId?: string; status?: VideoStatus }, page: Page) {
    return this.deps.videos.list(libraryId, filters, page);
  }

  /** A new video, announced to webhooks (`created`) in the same transaction. */
  async create(library: LibraryRow, input: CreateVideoInput): Promise<VideoOutcome> {
    const { transact, folders, videos, webhooks, clock } = this.deps;
    const result = await transact(async (trx): Promise<VideoOutcome> => {
      if (input.folder_id) await this.deps.libraries.lockById(trx, library.id);
      else await this.deps.libraries.holdAgainstDeletion(trx, library.id);
      if (input.folder_id && !(await folders.find(library.id, input.folder_id, trx))) {
        return { outcome: "folder_not_found" };
      }
      const now = nowIso(clock);
      const video: VideoRow = {
        id: randomUUID(),
        organization_id: library.organization_id,
        library_id: library.id,
        folder_id: input.folder_id ?? null,
        title: input.title,
        description: input.description ?? "",
        status: INITIAL_VIDEO_STATUS,
        duration: 0,
        manifest_url: "",
        thumbnail_url: "",
        thumbnail_count: 0,
        direct_play_url: "",
        preview_animation_thumbnail_url: "",
        created_at: now,
        updated_at: now,
      };
      await videos.insert(trx, video);
      await webhooks.emit(trx, {
        event: "created",
        organizationId: library.organization_id,
        libraryId: library.id,
        videoId: video.id,
        data: toVideoEventData(video, this.deps.config),
      });
      return { outcome: "created", video };
    });
    if (result.outcome === "created") webhooks.notify();
    return result;
  }

  async update(libraryId: string, id: string, input: UpdateVideoInput): Promise<VideoOutcome> {
    const { transact, folders, videos, clock } = this.deps;
    return transact(async (trx): Promise<VideoOutcome> => {
      if (input.folder_id) await this.deps.libraries.lockById(trx, libraryId);
      // Locked: a deletion sent at the same time waits, or has happened and this is 404.
      const video = await videos.lock(trx, libraryId, id);
      if (!video) return { outcome: "not_found" };
      if (input.folder_id && !(await folders.find(libraryId, input.folder_id, trx))) {
        return { outcome: "folder_not_found" };
      }
      const changes = {
        ...(input.title !== undefined ? { title: input.title } : {}),
        ...(input.description !== undefined ? { description: input.description } : {}),
        ...(input.folder_id !== undefined ? { folder_id: input.folder_id } : {}),
        updated_at: nowIso(clock),
      };
      const updated = await videos.update(trx, id, changes);
      return updated ? { outcome: "updated", video: updated } : { outcome: "not_found" };
    });
  }

  /** Deletes one video with its subtitles, thumbnails and files; webhooks hear `deleted`. */
  async delete(libraryId: string, id: string): Promise<{ outcome: "deleted" | "not_found" }> {
    const { transact, videos, webhooks, removals } = this.deps;
    const deleted = await transact(async (trx) => {
      // Locked: of deletions sent at the same time, one deletes and notifies, the others find nothing.
      const found = await videos.lock(trx, libraryId, id);
      return found && { removal: await this.removeInTransaction(trx, [found]) };
    });
    if (!deleted) return { outcome: "not_found" };
    webhooks.notify();
    await removals.carryOut(deleted.removal);
    return { outcome: "deleted" };
  }

  /**
   * Deletes videos inside the caller's transaction and queues their `deleted` notifications and the
   * removal of their files, which the caller carries out once the transaction has committed.
   */
  async removeInTransaction(trx: Executor, rows: VideoRow[]): Promise<QueuedRemoval | undefined> {
    const { videos, webhooks } = this.deps;
    // Asked once per library: a folder tree of thousands of videos that nobody is subscribed to
    // writes no notification, without a query per video.
    const libraryIds = [...new Set(rows.map((row) => row.library_id))];
    const wanted = new Set<string>();
    for (const libraryId of libraryIds) {
      if (await webhooks.wanted(trx, libraryId, "deleted")) wanted.add(libraryId);
    }
    for (const row of rows.filter((video) => wanted.has(video.library_id))) {
      await webhooks.emit(trx, {
        event: "deleted",
        organizationId: row.organization_id,
        libraryId: row.library_id,
        videoId: row.id,
        data: toVideoEventData(row, this.deps.config),
      });
    }
    await videos.deleteMany(
      trx,
      rows.map((row) => row.id),
    );
    return this.deps.removals.queue(trx, {
      prefixes: rows.map((row) => videoBlobPrefix(row.library_id, row.id)),
    });
  }
}
