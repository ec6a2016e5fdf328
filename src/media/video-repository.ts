import type { Insertable, Kysely, Updateable } from "kysely";
import type { Page } from "../http/pagination.ts";
import { touchedOnlyWhenChanged } from "../store/changes.ts";
import { chunksOf } from "../store/chunks.ts";
import type { DialectName } from "../store/database.ts";
import { selectPage } from "../store/paging.ts";
import type { Database } from "../store/tables.ts";
import type { Executor } from "../store/transactions.ts";
import type { SubtitleTable, ThumbnailTable, VideoRow, VideoStatus, VideoTable } from "./tables.ts";

/** Videos with their subtitles and uploaded thumbnails. */
export class VideoRepository {
  constructor(
    readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
  ) {}

  find(libraryId: string, id: string, executor: Executor = this.db) {
    return executor
      .selectFrom("media_videos")
      .selectAll()
      .where("library_id", "=", libraryId)
      .where("id", "=", id)
      .executeTakeFirst();
  }

  /**
   * `find` with the row's lock held for the rest of the transaction (on PostgreSQL the lock an
   * update takes; SQLite runs one write transaction at a time): a deletion of the video or its
   * library waits, or has happened and it is not found.
   */
  lock(executor: Executor, libraryId: string, id: string) {
    return executor
      .selectFrom("media_videos")
      .selectAll()
      .where("library_id", "=", libraryId)
      .where("id", "=", id)
      .$if(this.dialect === "postgres", (qb) => qb.forNoKeyUpdate())
      .executeTakeFirst();
  }

  async insert(executor: Executor, row: Insertable<VideoTable>): Promise<void> {
    await executor.insertInto("media_videos").values(row).execute();
  }

  /**
   * Changes the video; the row as it is now, or undefined when it is gone. `updated_at` moves only when a column changes, unless
   * `always`: a new thumbnail changes the video without changing its row (its URL stays), and
   * browsers are told to fetch it again by `updated_at`.
   */
  update(
    executor: Executor,
    id: string,
    changes: Updateable<VideoTable>,
    touch: "on change" | "always" = "on change",
  ) {
    return executor
      .updateTable("media_videos")
      .set(touch === "always" ? changes : touchedOnlyWhenChanged(changes))
      .where("id", "=", id)
      .returningAll()
      .executeTakeFirst();
  }

  list(libraryId: string, filters: { folderId?: string; status?: VideoStatus }, page: Page) {
    let query = this.db.selectFrom("media_videos").selectAll().where("library_id", "=", libraryId);
    if (filters.folderId) query = query.where("folder_id", "=", filters.folderId);
    if (filters.status) query = query.where("status", "=", filters.status);
    return selectPage(query.orderBy("created_at", "desc").orderBy("id", "desc"), page);
  }

  /** The videos in the folders, locked as `lock` locks one: a deletion of one of them at the same time waits. */
  async inFolders(executor: Executor, folderIds: string[]): Promise<VideoRow[]> {
    const videos: VideoRow[] = [];
    for (const chunk of chunksOf(folderIds)) {
      videos.push(
        ...(await executor
          .selectFrom("media_videos")
          .selectAll()
          .where("folder_id", "in", chunk)
          .$if(this.dialect === "postgres", (qb) => qb.forNoKeyUpdate())
          .execute()),
      );
    }
    return videos;
  }

  /** Deletes videos with their subtitles and thumbnail records. */
  async deleteMany(executor: Executor, ids: string[]): Promise<void> {
    for (const chunk of chunksOf(ids)) {
      await executor.deleteFrom("media_subtitles").where("video_id", "in", chunk).execute();
      await executor.deleteFrom("media_thumbnails").where("video_id", "in", chunk).execute();
      await executor.deleteFrom("media_videos").where("id", "in", chunk).execute();
    }
  }

  async deleteLibrary(executor: Executor, libraryId: string): Promise<void> {
    // Through the videos, whose index leads with the library, and the files' own video index.
    const libraryVideos = executor
      .selectFrom("media_videos")
      .select("id")
      .where("library_id", "=", libraryId);
    await executor.deleteFrom("media_subtitles").where("video_id", "in", libraryVideos).execute();
    await executor.deleteFrom("media_thumbnails").where("video_id", "in", libraryVideos).execute();
    await executor.deleteFrom("media_videos").where("library_id", "=", libraryId).execute();
  }

  // ---- Subtitles (deleted ones are kept with `deleted_at` and exist for no one)

  findSubtitle(videoId: string, id: string, executor: Executor = this.db) {
    return executor
      .selectFrom("media_subtitles")
      .selectAll()
      .where("video_id", "=", videoId)
      .where("id", "=", id)
      .where("deleted_at", "is", null)
      .executeTakeFirst();
  }

  /**
   * `findSubtitle` with the row's lock held for the rest of the transaction (as `lock`): a change
   * that replaces its file reads the file no other change replaces.
   */
  lockSubtitle(executor: Executor, videoId: string, id: string) {
    return executor
      .selectFrom("media_subtitles")
      .selectAll()
      .where("video_id", "=", videoId)
      .where("id", "=", id)
      .where("deleted_at", "is", null)
      .$if(this.dialect === "postgres", (qb) => qb.forNoKeyUpdate())
      .executeTakeFirst();
  }

  listSubtitles(videoId: string, page: Page) {
    return selectPage(
      this.db
        .selectFrom("media_subtitles")
        .selectAll()
        .where("video_id", "=", videoId)
        .where("deleted_at", "is", null)
        .orderBy("created_at", "desc")
        .orderBy("id", "desc"),
      page,
    );
  }

  async insertSubtitle(executor: Executor, row: Insertable<SubtitleTable>): Promise<void> {
    await executor.insertInto("media_subtitles").values(row).execute();
  }

  /** Changes the subtitle; the row as it is now, or undefined when it is gone. */
  updateSubtitle(executor: Executor, id: string, changes: Updateable<SubtitleTable>) {
    return executor
      .updateTable("media_subtitles")
      .set(touchedOnlyWhenChanged(changes))
      .where("id", "=", id)
      .returningAll()
      .executeTakeFirst();
  }

  /** Live subtitles of a video, oldest first (the order of the HLS master's tracks). */
  subtitlesOldestFirst(videoId: string) {
    return this.db
      .selectFrom("media_subtitles")
      .selectAll()
      .where("video_id", "=", videoId)
      .where("deleted_at", "is", null)
      .orderBy("created_at", "asc")
      .orderBy("id", "asc")
      .execute();
  }

  // ---- Thumbnails

  async insertThumbnail(executor: Executor, row: Insertable<ThumbnailTable>): Promise<void> {
    await executor.insertInto("media_thumbnails").values(row).execute();
  }

  thumbnailsOf(executor: Executor, videoId: string) {
    return executor.selectFrom("media_thumbnails").selectAll().where("video_id", "=", videoId).execute();
  }

  async deleteThumbnails(executor: Executor, ids: string[]): Promise<void> {
    if (ids.length > 0) await executor.deleteFrom("media_thumbnails").where("id", "in", ids).execute();
  }

  /** The most recently uploaded thumbnail of a video (what its `thumbnail_url` serves). */
  latestThumbnail(videoId: string, executor: Executor = this.db) {
    return executor
      .selectFrom("media_thumbnails")
      .selectAll()
      .where("video_id", "=", videoId)
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .executeTakeFirst();
  }
}
