import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

export const mediaFoldersVideosMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .createTable("media_folders")
      .addColumn("id", t.uuid, (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, (c) => c.notNull())
      .addColumn("library_id", t.uuid, (c) => c.notNull().references("libraries.id").onDelete("cascade"))
      .addColumn("parent_id", t.uuid, (c) => c.references("media_folders.id").onDelete("cascade"))
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("media_folders_library_idx")
      .on("media_folders")
      .columns(["library_id", "created_at"])
      .execute();
    await db.schema.createIndex("media_folders_parent_idx").on("media_folders").column("parent_id").execute();

    await db.schema
      .createTable("media_videos")
      .addColumn("id", t.uuid, (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, (c) => c.notNull())
      .addColumn("library_id", t.uuid, (c) => c.notNull().references("libraries.id").onDelete("cascade"))
      .addColumn("folder_id", t.uuid, (c) => c.references("media_folders.id"))
      .addColumn("title", "text", (c) => c.notNull())
      .addColumn("description", "text", (c) => c.notNull())
      .addColumn("status", "text", (c) => c.notNull())
      .addColumn("duration", "integer", (c) => c.notNull())
      .addColumn("manifest_url", "text", (c) => c.notNull())
      .addColumn("thumbnail_url", "text", (c) => c.notNull())
      .addColumn("thumbnail_count", "integer", (c) => c.notNull())
      .addColumn("direct_play_url", "text", (c) => c.notNull())
      .addColumn("preview_animation_thumbnail_url", "text", (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("media_videos_library_idx")
      .on("media_videos")
      .columns(["library_id", "created_at"])
      .execute();
    await db.schema.createIndex("media_videos_folder_idx").on("media_videos").column("folder_id").execute();
  },
});
