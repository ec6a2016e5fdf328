import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

/**
 * Endpoints a dispatcher judged slow (an attempt took a second or more) and since when; the row goes
 * once one answers sooner. A restarted process starts from them, where it knew no endpoint as slow
 * and let hanging receivers take the fast ones' slots again for a timeout (QA of session 54). A table
 * of its own, not announced as a store change (`UNANNOUNCED_TABLES`): no answer reads it, and on
 * PostgreSQL an announced write makes every node forget its kept answers.
 */
export const webhookEndpointSlowMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .createTable("webhook_slow_endpoints")
      .addColumn("endpoint_id", t.uuid, (c) =>
        c.primaryKey().references("webhook_endpoints.id").onDelete("cascade"),
      )
      .addColumn("slow_since", t.timestamp, (c) => c.notNull())
      .execute();
  },
});
