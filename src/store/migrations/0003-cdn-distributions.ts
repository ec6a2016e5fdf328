import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

export const cdnDistributionsMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .createTable("cdn_distributions")
      .addColumn("id", t.uuid, (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, (c) =>
        c.notNull().references("organizations.id").onDelete("cascade"),
      )
      .addColumn("hostname", "text", (c) => c.notNull().unique())
      .addColumn("origin_url", "text", (c) => c.notNull())
      .addColumn("default_ttl_s", "integer", (c) => c.notNull())
      .addColumn("status", "text", (c) => c.notNull())
      .addColumn("library_id", t.uuid)
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("cdn_distributions_organization_idx")
      .on("cdn_distributions")
      .columns(["organization_id", "created_at"])
      .execute();
  },
});
