import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

/**
 * An endpoint's previous signing secret, kept after a rotation that asked for an overlap
 * (`previous_secret_expires_in_s`): deliveries are signed with it too until it expires, so a receiver
 * switches to the new secret without rejecting any. Sealed like `secret`; null when there is none.
 */
export const webhookPreviousSecretMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema.alterTable("webhook_endpoints").addColumn("previous_secret", "text").execute();
    await db.schema
      .alterTable("webhook_endpoints")
      .addColumn("previous_secret_expires_at", t.timestamp)
      .execute();
  },
});
