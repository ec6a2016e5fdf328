import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

export const jobsMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .createTable("jobs")
      .addColumn("id", t.uuid, (c) => c.primaryKey())
      .addColumn("kind", "text", (c) => c.notNull())
      .addColumn("payload", t.json, (c) => c.notNull())
      .addColumn("status", "text", (c) => c.notNull())
      .addColumn("run_at", t.timestamp, (c) => c.notNull())
      .addColumn("attempts", "integer", (c) => c.notNull())
      .addColumn("max_attempts", "integer", (c) => c.notNull())
      .addColumn("locked_until", t.timestamp)
      .addColumn("last_error", "text")
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema.createIndex("jobs_due_idx").on("jobs").columns(["status", "run_at"]).execute();
  },
});
