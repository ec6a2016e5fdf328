import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

export const mediaSubtitlesThumbnailsMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .createTable("media_subtitles")
      .addColumn("id", t.uuid, (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, (c) => c.notNull())
      .addColumn("library_id", t.uuid, (c) => c.notNull())
      .addColumn("video_id", t.uuid, (c) => c.notNull().references("media_videos.id").onDelete("cascade"))
      .addColumn("title", "text", (c) => c.notNull())
      .addColumn("language", "text", (c) => c.notNull())
      .addColumn("path", "text", (c) => c.notNull())
      .addColumn("format", "text", (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .addColumn("deleted_at", t.timestamp)
      .execute();
    await db.schema
      .createIndex("media_subtitles_video_idx")
      .on("media_subtitles")
      .columns(["video_id", "created_at"])
      .execute();

    await db.schema
      .createTable("media_thumbnails")
      .addColumn("id", t.uuid, (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, (c) => c.notNull())
      .addColumn("library_id", t.uuid, (c) => c.notNull())
      .addColumn("video_id", t.uuid, (c) => c.notNull().references("media_videos.id").onDelete("cascade"))
      .addColumn("path", "text", (c) => c.notNull())
      .addColumn("content_type", "text", (c) => c.notNull())
      .addColumn("size_bytes", "integer", (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("media_thumbnails_video_idx")
      .on("media_thumbnails")
      .columns(["video_id", "created_at"])
      .execute();
  },
});
