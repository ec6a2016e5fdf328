import { type Migration, sql } from "kysely";

/**
 * The delivery queue's indexes hold only the rows the dispatcher looks for: waiting attempts by due
 * time and claimed ones by lease end, each with the endpoint and id so a claim's candidate scan reads
 * the index alone, also past a saturated endpoint's backlog. The indexes they replace led with
 * `state`; SQLite's planner then also chose them for lookups of one (message, endpoint) pair and read
 * every finished attempt (docs/performance.md, session 3).
 */
export const webhookQueueIndexesMigration = (): Migration => ({
  async up(db) {
    await db.schema.dropIndex("webhook_deliveries_due_idx").execute();
    await db.schema.dropIndex("webhook_deliveries_lease_idx").execute();
    await db.schema
      .createIndex("webhook_deliveries_waiting_idx")
      .on("webhook_deliveries")
      .columns(["due_at", "endpoint_id", "id"])
      .where(sql.ref("state"), "=", sql.lit("pending"))
      .execute();
    await db.schema
      .createIndex("webhook_deliveries_claimed_idx")
      .on("webhook_deliveries")
      .columns(["locked_until", "endpoint_id", "id"])
      .where(sql.ref("state"), "=", sql.lit("sending"))
      .execute();
  },
});
