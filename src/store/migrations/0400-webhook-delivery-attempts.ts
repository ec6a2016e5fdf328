import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

/**
 * Delivery attempts: a flag for attempts asked for by hand (they do not advance the retry schedule),
 * one row per (message, endpoint, attempt) so two workers can never record the same attempt twice,
 * and an index for finding claims whose lease ran out.
 */
export const webhookDeliveryAttemptsMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .alterTable("webhook_deliveries")
      .addColumn("manual", t.boolean, (c) => c.notNull().defaultTo(false))
      .execute();
    await db.schema
      .createIndex("webhook_deliveries_attempt_uq")
      .on("webhook_deliveries")
      .columns(["message_id", "endpoint_id", "attempt"])
      .unique()
      .execute();
    await db.schema
      .createIndex("webhook_deliveries_lease_idx")
      .on("webhook_deliveries")
      .columns(["state", "locked_until"])
      .execute();
  },
});
