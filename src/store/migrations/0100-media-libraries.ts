import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

export const mediaLibrariesMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .createTable("libraries")
      .addColumn("id", t.uuid, (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, (c) =>
        c.notNull().references("organizations.id").onDelete("cascade"),
      )
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("description", "text", (c) => c.notNull())
      .addColumn("usage_type", "text", (c) => c.notNull())
      .addColumn("default_privacy", "text", (c) => c.notNull())
      .addColumn("status", "text", (c) => c.notNull())
      .addColumn("region", "text", (c) => c.notNull())
      .addColumn("distribution_id", t.uuid)
      .addColumn("whitelist_referrers", t.json, (c) => c.notNull())
      .addColumn("blocked_countries", t.json, (c) => c.notNull())
      .addColumn("video_privacy", "text", (c) => c.notNull())
      .addColumn("created_by", t.uuid, (c) => c.notNull())
      .addColumn("updated_by", t.uuid)
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("libraries_organization_idx")
      .on("libraries")
      .columns(["organization_id", "created_at"])
      .execute();
  },
});
