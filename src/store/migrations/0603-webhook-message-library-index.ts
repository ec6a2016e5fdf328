import type { Migration } from "kysely";

/**
 * A library's delete removes its notifications by library; without this index it read every
 * notification ever kept (they stay, docs/operations.md). One entry per notification, not per
 * attempt, so the queue's writes barely pay for it.
 */
export const webhookMessageLibraryIndexMigration = (): Migration => ({
  async up(db) {
    await db.schema
      .createIndex("webhook_messages_library_idx")
      .on("webhook_messages")
      .column("library_id")
      .execute();
  },
});
