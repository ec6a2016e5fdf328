import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

/** Resumable (tus) upload records and URL imports of video sources. */
export const videoUploadsMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .createTable("video_uploads")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, (c) => c.notNull())
      .addColumn("library_id", t.uuid, (c) => c.notNull())
      .addColumn("video_id", t.uuid, (c) => c.notNull().references("media_videos.id").onDelete("cascade"))
      .addColumn("size_bytes", t.bigint)
      .addColumn("metadata", t.json, (c) => c.notNull())
      .addColumn("completed_at", t.timestamp)
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema.createIndex("video_uploads_created").on("video_uploads").column("created_at").execute();
    await db.schema
      .createTable("video_imports")
      .addColumn("video_id", t.uuid, (c) => c.primaryKey().references("media_videos.id").onDelete("cascade"))
      .addColumn("id", t.uuid, (c) => c.notNull())
      .addColumn("organization_id", t.uuid, (c) => c.notNull())
      .addColumn("library_id", t.uuid, (c) => c.notNull())
      .addColumn("url", "text", (c) => c.notNull())
      .addColumn("status", "text", (c) => c.notNull())
      .addColumn("bytes_received", t.bigint, (c) => c.notNull())
      .addColumn("content_length", t.bigint)
      .addColumn("failure_reason", "text")
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
  },
});
