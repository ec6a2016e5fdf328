import { type CreateTableBuilder, type Migration, sql } from "kysely";
import type { ColumnTypes } from "../columns.ts";

/** The counter columns every traffic rollup table has (also used by later rollup migrations). */
export const COUNTERS = [
  "requests",
  "sent_bytes",
  "upstream_bytes",
  "origin_time_ms",
  "origin_fetches",
  "responses_2xx",
  "responses_3xx",
  "responses_4xx",
  "responses_5xx",
];

/**
 * Quarter-hour and daily rollups per distribution, and minute, quarter-hour, hourly and daily ones
 * per organization, so every analytics query reads few rows; filled from the rollups already stored
 * (hours outlive minutes, so daily sums come from the hourly table, quarter hours from the minutes
 * still kept).
 */
export const cdnTrafficRollupsMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    const withCounters = <T extends string, C extends string>(table: CreateTableBuilder<T, C>) => {
      let built = table;
      for (const column of COUNTERS) built = built.addColumn(column, t.bigint, (c) => c.notNull());
      return built;
    };

    for (const table of ["cdn_traffic_quarter_hours", "cdn_traffic_days"]) {
      await withCounters(
        db.schema
          .createTable(table)
          .addColumn("distribution_id", t.uuid, (c) => c.notNull())
          .addColumn("organization_id", t.uuid, (c) =>
            c.notNull().references("organizations.id").onDelete("cascade"),
          )
          .addColumn("minute", t.bigint, (c) => c.notNull()),
      )
        .addPrimaryKeyConstraint(`${table}_pk`, ["distribution_id", "minute"])
        .execute();
      // For the organization's cascading delete.
      await db.schema
        .createIndex(`${table}_organization_idx`)
        .on(table)
        .columns(["organization_id", "minute"])
        .execute();
    }

    for (const table of [
      "cdn_organization_traffic_minutes",
      "cdn_organization_traffic_quarter_hours",
      "cdn_organization_traffic_hours",
      "cdn_organization_traffic_days",
    ]) {
      await withCounters(
        db.schema
          .createTable(table)
          .addColumn("organization_id", t.uuid, (c) =>
            c.notNull().references("organizations.id").onDelete("cascade"),
          )
          .addColumn("minute", t.bigint, (c) => c.notNull()),
      )
        .addPrimaryKeyConstraint(`${table}_pk`, ["organization_id", "minute"])
        .execute();
    }
    // The housekeeper deletes expired minute rollups by time.
    await db.schema
      .createIndex("cdn_organization_traffic_minutes_minute_idx")
      .on("cdn_organization_traffic_minutes")
      .column("minute")
      .execute();

    const sums = sql.join(COUNTERS.map((column) => sql`sum(${sql.ref(column)})`));
    const columns = sql.join(COUNTERS.map((column) => sql.ref(column)));
    const day = sql`(${sql.ref("minute")} / 1440) * 1440`;
    const quarter = sql`(${sql.ref("minute")} / 15) * 15`;
    await sql`insert into cdn_traffic_quarter_hours (distribution_id, organization_id, minute, ${columns})
      select distribution_id, organization_id, ${quarter}, ${sums} from cdn_traffic_minutes
      group by distribution_id, organization_id, ${quarter}`.execute(db);
    await sql`insert into cdn_organization_traffic_quarter_hours (organization_id, minute, ${columns})
      select organization_id, ${quarter}, ${sums} from cdn_traffic_minutes
      group by organization_id, ${quarter}`.execute(db);
    await sql`insert into cdn_traffic_days (distribution_id, organization_id, minute, ${columns})
      select distribution_id, organization_id, ${day}, ${sums} from cdn_traffic_hours
      group by distribution_id, organization_id, ${day}`.execute(db);
    await sql`insert into cdn_organization_traffic_minutes (organization_id, minute, ${columns})
      select organization_id, minute, ${sums} from cdn_traffic_minutes
      group by organization_id, minute`.execute(db);
    await sql`insert into cdn_organization_traffic_hours (organization_id, minute, ${columns})
      select organization_id, minute, ${sums} from cdn_traffic_hours
      group by organization_id, minute`.execute(db);
    await sql`insert into cdn_organization_traffic_days (organization_id, minute, ${columns})
      select organization_id, ${day}, ${sums} from cdn_traffic_hours
      group by organization_id, ${day}`.execute(db);
  },
});
