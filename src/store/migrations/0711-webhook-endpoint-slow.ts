import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

/**
 * When a dispatcher last judged the endpoint slow (an attempt took a second or more), null once one
 * answered sooner: a restarted process starts from these marks, where it knew no endpoint as slow and
 * let hanging receivers take the fast ones' slots again for a timeout (QA of session 54).
 */
export const webhookEndpointSlowMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema.alterTable("webhook_endpoints").addColumn("slow_since", t.timestamp).execute();
  },
});
