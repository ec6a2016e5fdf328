import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

/** Purge history and per-minute edge traffic rollups. */
export const cdnPurgesTrafficMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .createTable("cdn_purges")
      .addColumn("id", t.uuid, (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, (c) =>
        c.notNull().references("organizations.id").onDelete("cascade"),
      )
      .addColumn("distribution_id", t.uuid, (c) =>
        c.notNull().references("cdn_distributions.id").onDelete("cascade"),
      )
      .addColumn("paths", t.json, (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("cdn_purges_distribution_idx")
      .on("cdn_purges")
      .columns(["distribution_id", "created_at"])
      .execute();

    // Rows outlive their distribution (an organization's totals keep its past traffic), so no
    // foreign key to cdn_distributions; they go with the organization. The hourly table holds the
    // same sums per hour (`minute` = the hour's first minute) for long ranges.
    for (const table of ["cdn_traffic_minutes", "cdn_traffic_hours"]) {
      await db.schema
        .createTable(table)
        .addColumn("distribution_id", t.uuid, (c) => c.notNull())
        .addColumn("organization_id", t.uuid, (c) =>
          c.notNull().references("organizations.id").onDelete("cascade"),
        )
        .addColumn("minute", t.bigint, (c) => c.notNull())
        .addColumn("requests", t.bigint, (c) => c.notNull())
        .addColumn("sent_bytes", t.bigint, (c) => c.notNull())
        .addColumn("upstream_bytes", t.bigint, (c) => c.notNull())
        .addColumn("origin_time_ms", t.bigint, (c) => c.notNull())
        .addColumn("origin_fetches", t.bigint, (c) => c.notNull())
        .addColumn("responses_2xx", t.bigint, (c) => c.notNull())
        .addColumn("responses_3xx", t.bigint, (c) => c.notNull())
        .addColumn("responses_4xx", t.bigint, (c) => c.notNull())
        .addColumn("responses_5xx", t.bigint, (c) => c.notNull())
        .addPrimaryKeyConstraint(`${table}_pk`, ["distribution_id", "minute"])
        .execute();
      await db.schema
        .createIndex(`${table}_organization_idx`)
        .on(table)
        .columns(["organization_id", "minute"])
        .execute();
    }
  },
});
