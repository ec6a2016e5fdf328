import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

/**
 * Where a video's HLS segments start, in MPEG-TS ticks (90 kHz): the first video frame's timestamp,
 * which subtitles are mapped to (`X-TIMESTAMP-MAP`). Null for videos processed before it was kept.
 */
export const videoTimelineStartMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema.alterTable("video_processing").addColumn("timeline_start_pts", t.bigint).execute();
  },
});
