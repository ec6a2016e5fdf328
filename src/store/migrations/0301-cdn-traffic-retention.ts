import type { Migration } from "kysely";

/** Lets the housekeeper delete expired minute rollups by time without scanning the table. */
export const cdnTrafficRetentionMigration = (): Migration => ({
  async up(db) {
    await db.schema
      .createIndex("cdn_traffic_minutes_minute_idx")
      .on("cdn_traffic_minutes")
      .column("minute")
      .execute();
  },
});
