import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

/** One row per video that has a source: which upload is current and how its processing went. */
export const videoProcessingMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .createTable("video_processing")
      .addColumn("video_id", t.uuid, (c) => c.primaryKey().references("media_videos.id").onDelete("cascade"))
      .addColumn("organization_id", t.uuid, (c) => c.notNull())
      .addColumn("library_id", t.uuid, (c) => c.notNull())
      .addColumn("generation", "integer", (c) => c.notNull())
      .addColumn("source_key", "text", (c) => c.notNull())
      .addColumn("source_bytes", t.bigint, (c) => c.notNull())
      .addColumn("duration_s", "real", (c) => c.notNull())
      .addColumn("has_audio", t.boolean, (c) => c.notNull())
      .addColumn("thumbnail_count", "integer", (c) => c.notNull())
      .addColumn("failure_reason", "text")
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
  },
});
