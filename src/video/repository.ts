import type { Kysely } from "kysely";
import type { Database } from "../store/tables.ts";
import type { Executor } from "../store/transactions.ts";
import type { NewProcessingRow, ProcessingChanges } from "./tables.ts";

/** The processing rows of videos; media rows are read through media's repositories. */
export class VideoProcessingRepository {
  constructor(readonly db: Kysely<Database>) {}

  find(videoId: string, executor: Executor = this.db) {
    return executor
      .selectFrom("video_processing")
      .selectAll()
      .where("video_id", "=", videoId)
      .executeTakeFirst();
  }

  async insert(executor: Executor, row: NewProcessingRow): Promise<void> {
    await executor.insertInto("video_processing").values(row).execute();
  }

  /** Updates the row only while `generation` is still current; returns whether it was. */
  async updateIfCurrent(
    executor: Executor,
    videoId: string,
    generation: number,
    changes: ProcessingChanges,
  ): Promise<boolean> {
    const result = await executor
      .updateTable("video_processing")
      .set(changes)
      .where("video_id", "=", videoId)
      .where("generation", "=", generation)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async replace(executor: Executor, videoId: string, changes: ProcessingChanges) {
    await executor.updateTable("video_processing").set(changes).where("video_id", "=", videoId).execute();
  }
}
