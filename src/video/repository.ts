import type { Insertable, Kysely, Selectable, Updateable } from "kysely";
import type { Database } from "../store/tables.ts";
import type { Executor } from "../store/transactions.ts";
import type { VideoProcessingTable } from "./tables.ts";

export type ProcessingRow = Selectable<VideoProcessingTable>;

/** The only queries of the video domain: processing rows, and what playback reads of media rows. */
export class VideoProcessingRepository {
  constructor(readonly db: Kysely<Database>) {}

  find(videoId: string, executor: Executor = this.db) {
    return executor
      .selectFrom("video_processing")
      .selectAll()
      .where("video_id", "=", videoId)
      .executeTakeFirst();
  }

  async insert(executor: Executor, row: Insertable<VideoProcessingTable>): Promise<void> {
    await executor.insertInto("video_processing").values(row).execute();
  }

  /** Updates the row only while `generation` is still current; returns whether it was. */
  async updateIfCurrent(
    executor: Executor,
    videoId: string,
    generation: number,
    changes: Updateable<VideoProcessingTable>,
  ): Promise<boolean> {
    const result = await executor
      .updateTable("video_processing")
      .set(changes)
      .where("video_id", "=", videoId)
      .where("generation", "=", generation)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async replace(executor: Executor, videoId: string, changes: Updateable<VideoProcessingTable>) {
    await executor.updateTable("video_processing").set(changes).where("video_id", "=", videoId).execute();
  }

  /** A library by id, whoever owns it (playback is not authenticated; the id comes from the distribution). */
  library(libraryId: string) {
    return this.db.selectFrom("libraries").selectAll().where("id", "=", libraryId).executeTakeFirst();
  }

  video(libraryId: string, videoId: string) {
    return this.db
      .selectFrom("media_videos")
      .selectAll()
      .where("library_id", "=", libraryId)
      .where("id", "=", videoId)
      .executeTakeFirst();
  }

  /** Live subtitles of a video, oldest first (the order of the HLS master's tracks). */
  subtitles(videoId: string) {
    return this.db
      .selectFrom("media_subtitles")
      .selectAll()
      .where("video_id", "=", videoId)
      .where("deleted_at", "is", null)
      .orderBy("created_at", "asc")
      .orderBy("id", "asc")
      .execute();
  }

  subtitle(videoId: string, id: string) {
    return this.db
      .selectFrom("media_subtitles")
      .selectAll()
      .where("video_id", "=", videoId)
      .where("id", "=", id)
      .where("deleted_at", "is", null)
      .executeTakeFirst();
  }

  /** The most recent uploaded thumbnail of a video. */
  uploadedThumbnail(videoId: string, executor: Executor = this.db) {
    return executor
      .selectFrom("media_thumbnails")
      .selectAll()
      .where("video_id", "=", videoId)
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .executeTakeFirst();
  }

  player(libraryId: string, playerId: string) {
    return this.db
      .selectFrom("media_players")
      .selectAll()
      .where("library_id", "=", libraryId)
      .where("id", "=", playerId)
      .executeTakeFirst();
  }

  defaultPlayer(libraryId: string) {
    return this.db
      .selectFrom("media_players")
      .selectAll()
      .where("library_id", "=", libraryId)
      .where("is_default", "=", true)
      .executeTakeFirst();
  }
}
