import { randomUUID } from "node:crypto";
import type { Selectable } from "kysely";
import { nowIso } from "../clock.ts";
import type { Page } from "../http/pagination.ts";
import type { MediaDeps } from "./context.ts";
import type { SubtitleFormat } from "./subtitle-format.ts";
import type { SubtitleTable, VideoTable } from "./tables.ts";
import { videoAssetUrl } from "./urls.ts";

type SubtitleRow = Selectable<SubtitleTable>;
type VideoRow = Selectable<VideoTable>;

export interface StoredSubtitleFile {
  key: string;
  format: SubtitleFormat;
}

/** Subtitles and uploaded thumbnails of a video. Files arrive already stored and checked. */
export class SubtitleService {
  constructor(private readonly deps: MediaDeps) {}

  find(videoId: string, id: string): Promise<SubtitleRow | undefined> {
    return this.deps.videos.findSubtitle(videoId, id);
  }

  list(videoId: string, page: Page) {
    return this.deps.videos.listSubtitles(videoId, page);
  }

  /** Undefined when the video was deleted while its subtitle was uploading. */
  async create(
    video: VideoRow,
    input: { title: string; language: string; file: StoredSubtitleFile },
  ): Promise<SubtitleRow | undefined> {
    const now = nowIso(this.deps.clock);
    const row: SubtitleRow = {
      id: randomUUID(),
      organization_id: video.organization_id,
      library_id: video.library_id,
      video_id: video.id,
      title: input.title,
      language: input.language,
      path: input.file.key,
      format: input.file.format,
      created_at: now,
      updated_at: now,
      deleted_at: null,
    };
    return this.deps.db.transaction().execute(async (trx) => {
      if (!(await this.deps.videos.find(video.library_id, video.id, trx))) return undefined;
      await this.deps.videos.insertSubtitle(trx, row);
      return row;
    });
  }

  /** Changes what is given; a new file replaces the old one, whose blob goes after commit. */
  async update(
    videoId: string,
    id: string,
    input: { title?: string; language?: string; file?: StoredSubtitleFile },
  ): Promise<SubtitleRow | undefined> {
    const { db, videos, blobs, clock } = this.deps;
    const result = await db.transaction().execute(async (trx) => {
      const subtitle = await videos.findSubtitle(videoId, id, trx);
      if (!subtitle) return undefined;
      const changes = {
        ...(input.title !== undefined ? { title: input.title } : {}),
        ...(input.language !== undefined ? { language: input.language } : {}),
        ...(input.file ? { path: input.file.key, format: input.file.format } : {}),
        updated_at: nowIso(clock),
      };
      await videos.updateSubtitle(trx, id, changes);
      return { before: subtitle, after: { ...subtitle, ...changes } };
    });
    if (!result) return undefined;
    if (input.file) await blobs.delete(result.before.path);
    return result.after;
  }

  /** Marks the subtitle deleted (it then exists for no one) and removes its file. */
  async delete(videoId: string, id: string): Promise<boolean> {
    const { db, videos, blobs, clock } = this.deps;
    const subtitle = await db.transaction().execute(async (trx) => {
      const found = await videos.findSubtitle(videoId, id, trx);
      if (found) await videos.updateSubtitle(trx, id, { deleted_at: nowIso(clock) });
      return found;
    });
    if (!subtitle) return false;
    await blobs.delete(subtitle.path);
    return true;
  }

  /**
   * Records an uploaded thumbnail and points the video's `thumbnail_url` at it (served by the
   * library's distribution as `/{video_id}/thumbnail.jpg`). Earlier uploads are replaced.
   */
  async setThumbnail(
    video: VideoRow,
    file: { key: string; contentType: string; sizeBytes: number },
  ): Promise<VideoRow | undefined> {
    const { db, videos, blobs, clock, config } = this.deps;
    const now = nowIso(clock);
    const result = await db.transaction().execute(async (trx) => {
      const current = await videos.find(video.library_id, video.id, trx);
      if (!current) return undefined;
      const previous = await videos.thumbnailsOf(trx, video.id);
      await videos.deleteThumbnails(
        trx,
        previous.map((row) => row.id),
      );
      await videos.insertThumbnail(trx, {
        id: randomUUID(),
        organization_id: video.organization_id,
        library_id: video.library_id,
        video_id: video.id,
        path: file.key,
        content_type: file.contentType,
        size_bytes: file.sizeBytes,
        created_at: now,
      });
      const changes = {
        thumbnail_url: videoAssetUrl(config, video.library_id, video.id, "thumbnail.jpg"),
        updated_at: now,
      };
      await videos.update(trx, video.id, changes);
      return { video: { ...current, ...changes }, previous };
    });
    if (!result) {
      await blobs.delete(file.key);
      return undefined;
    }
    for (const row of result.previous) await blobs.delete(row.path);
    return result.video;
  }
}
