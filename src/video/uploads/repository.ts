import type { Insertable, Kysely, Updateable } from "kysely";
import type { Database } from "../../store/tables.ts";
import type { Executor } from "../../store/transactions.ts";
import type { VideoImportTable, VideoUploadTable } from "./tables.ts";

/** The only queries of resumable uploads and URL imports. */
export class UploadRepository {
  constructor(readonly db: Kysely<Database>) {}

  findUpload(id: string, executor: Executor = this.db) {
    return executor.selectFrom("video_uploads").selectAll().where("id", "=", id).executeTakeFirst();
  }

  async insertUpload(executor: Executor, row: Insertable<VideoUploadTable>): Promise<void> {
    await executor.insertInto("video_uploads").values(row).execute();
  }

  async updateUpload(executor: Executor, id: string, changes: Updateable<VideoUploadTable>): Promise<void> {
    await executor.updateTable("video_uploads").set(changes).where("id", "=", id).execute();
  }

  async deleteUpload(executor: Executor, id: string): Promise<void> {
    await executor.deleteFrom("video_uploads").where("id", "=", id).execute();
  }

  async uploadIds(): Promise<string[]> {
    const rows = await this.db.selectFrom("video_uploads").select("id").execute();
    return rows.map((row) => row.id);
  }

  /**
   * Claims the move of a finished upload into the blob store until `until`: false when it is done
   * already, or another node's claim still holds.
   */
  async claimFinishing(id: string, now: string, until: string): Promise<boolean> {
    const result = await this.db
      .updateTable("video_uploads")
      .set({ finishing_until: until })
      .where("id", "=", id)
      .where("completed_at", "is", null)
      .where((eb) => eb.or([eb("finishing_until", "is", null), eb("finishing_until", "<", now)]))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Uploads of a known length not yet handed to processing: some may hold all their bytes already. */
  unfinishedUploads() {
    return this.db
      .selectFrom("video_uploads")
      .selectAll()
      .where("completed_at", "is", null)
      .where("size_bytes", "is not", null)
      .execute();
  }

  /** A video's unfinished uploads that no node is moving into the blob store, newest first. */
  async openUploadIdsOf(executor: Executor, videoId: string): Promise<string[]> {
    const rows = await executor
      .selectFrom("video_uploads")
      .select("id")
      .where("video_id", "=", videoId)
      .where("completed_at", "is", null)
      .where("finishing_until", "is", null)
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .execute();
    return rows.map((row) => row.id);
  }

  /** Uploads created before `before` (unfinished ones are abandoned; finished ones are only kept to answer HEAD). */
  async uploadsCreatedBefore(before: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom("video_uploads")
      .select("id")
      .where("created_at", "<", before)
      .execute();
    return rows.map((row) => row.id);
  }

  findImport(videoId: string, executor: Executor = this.db) {
    return executor
      .selectFrom("video_imports")
      .selectAll()
      .where("video_id", "=", videoId)
      .executeTakeFirst();
  }

  /** Inserts the video's import, or replaces the previous one. */
  async putImport(executor: Executor, row: Insertable<VideoImportTable>): Promise<void> {
    const { video_id: _videoId, ...changes } = row;
    await executor
      .insertInto("video_imports")
      .values(row)
      .onConflict((conflict) => conflict.column("video_id").doUpdateSet(changes))
      .execute();
  }

  /** Updates the import only while it is still the video's current one (`id`); returns whether it was. */
  async updateImportIfCurrent(
    executor: Executor,
    videoId: string,
    id: string,
    changes: Updateable<VideoImportTable>,
  ): Promise<boolean> {
    const result = await executor
      .updateTable("video_imports")
      .set(changes)
      .where("video_id", "=", videoId)
      .where("id", "=", id)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }
}
