import { type Migration, sql } from "kysely";
import type { ColumnTypes } from "../columns.ts";
import { COUNTERS } from "./0302-cdn-traffic-rollups.ts";

/**
 * Five-minute rollups per distribution and per organization, so a `5m` query reads one row per bucket
 * instead of summing up to five minute rows into each; filled from the minute rows still kept (as the
 * quarter hours were by `0302-cdn-traffic-rollups`), and deleted with them by the retention.
 */
export const cdnTrafficFiveMinutesMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    let distributionTable = db.schema
      .createTable("cdn_traffic_five_minutes")
      .addColumn("distribution_id", t.uuid, (c) => c.notNull())
      .addColumn("organization_id", t.uuid, (c) =>
        c.notNull().references("organizations.id").onDelete("cascade"),
      )
      .addColumn("minute", t.bigint, (c) => c.notNull());
    let organizationTable = db.schema
      .createTable("cdn_organization_traffic_five_minutes")
      .addColumn("organization_id", t.uuid, (c) =>
        c.notNull().references("organizations.id").onDelete("cascade"),
      )
      .addColumn("minute", t.bigint, (c) => c.notNull());
    for (const column of COUNTERS) {
      distributionTable = distributionTable.addColumn(column, t.bigint, (c) => c.notNull());
      organizationTable = organizationTable.addColumn(column, t.bigint, (c) => c.notNull());
    }
    await distributionTable
      .addPrimaryKeyConstraint("cdn_traffic_five_minutes_pk", ["distribution_id", "minute"])
      .execute();
    // For the organization's cascading delete.
    await db.schema
      .createIndex("cdn_traffic_five_minutes_organization_idx")
      .on("cdn_traffic_five_minutes")
      .columns(["organization_id", "minute"])
      .execute();
    await organizationTable
      .addPrimaryKeyConstraint("cdn_organization_traffic_five_minutes_pk", ["organization_id", "minute"])
      .execute();
    // The housekeeper deletes them by time, with the minute rollups.
    for (const table of ["cdn_traffic_five_minutes", "cdn_organization_traffic_five_minutes"]) {
      await db.schema.createIndex(`${table}_minute_idx`).on(table).column("minute").execute();
    }

    const sums = sql.join(COUNTERS.map((column) => sql`sum(${sql.ref(column)})`));
    const columns = sql.join(COUNTERS.map((column) => sql.ref(column)));
    const fiveMinutes = sql`(${sql.ref("minute")} / 5) * 5`;
    await sql`insert into cdn_traffic_five_minutes (distribution_id, organization_id, minute, ${columns})
      select distribution_id, organization_id, ${fiveMinutes}, ${sums} from cdn_traffic_minutes
      group by distribution_id, organization_id, ${fiveMinutes}`.execute(db);
    await sql`insert into cdn_organization_traffic_five_minutes (organization_id, minute, ${columns})
      select organization_id, ${fiveMinutes}, ${sums} from cdn_organization_traffic_minutes
      group by organization_id, ${fiveMinutes}`.execute(db);
  },
});
