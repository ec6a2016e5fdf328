import type { Migration } from "kysely";

/**
 * A video's uploads are found by their video: each new upload counts the video's unfinished ones
 * (CUMULO_MAX_OPEN_UPLOADS_PER_VIDEO), and a video's delete cascades to them. Without this index
 * each of those read every upload of the last day.
 */
export const videoUploadsByVideoMigration = (): Migration => ({
  async up(db) {
    await db.schema.createIndex("video_uploads_video_idx").on("video_uploads").column("video_id").execute();
  },
});
