import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

/**
 * Who is moving a finished resumable upload into the blob store: API nodes sharing the uploads
 * folder (and their passes over stranded uploads) would otherwise each move it, and the video would
 * be processed once per move.
 */
export const videoUploadFinishingMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema.alterTable("video_uploads").addColumn("finishing_until", t.timestamp).execute();
  },
});
