import { type Migration, sql } from "kysely";

/**
 * Waiting attempts by endpoint: a claim finds the endpoints with work and each one's oldest attempts
 * by seeking here, one seek per endpoint, where the due-time index made it read past every attempt of
 * an endpoint it could not serve (a slow endpoint's backlog, on every claim: docs/performance.md,
 * session 53).
 */
export const webhookWaitingByEndpointMigration = (): Migration => ({
  async up(db) {
    await db.schema
      .createIndex("webhook_deliveries_waiting_endpoint_idx")
      .on("webhook_deliveries")
      .columns(["endpoint_id", "due_at", "id"])
      .where(sql.ref("state"), "=", sql.lit("pending"))
      .execute();
  },
});
