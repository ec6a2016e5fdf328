import type { Migration } from "kysely";

/**
 * The video's source generation when a resumable upload's last byte was stored: an upload finished
 * after the video got a newer source (a one-request upload, say, while this one was stranded) does
 * not replace it. Null until the last byte, and for uploads of older versions, finished as before.
 */
export const videoUploadGenerationMigration = (): Migration => ({
  async up(db) {
    await db.schema.alterTable("video_uploads").addColumn("source_generation", "integer").execute();
  },
});
