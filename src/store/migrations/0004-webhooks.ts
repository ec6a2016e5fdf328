import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

export const webhooksMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .createTable("webhook_endpoints")
      .addColumn("id", t.uuid, (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, (c) =>
        c.notNull().references("organizations.id").onDelete("cascade"),
      )
      .addColumn("library_id", t.uuid, (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("url", "text", (c) => c.notNull())
      .addColumn("events", t.json, (c) => c.notNull())
      .addColumn("headers", t.json)
      .addColumn("retry_policy", t.json)
      .addColumn("secret", "text", (c) => c.notNull())
      .addColumn("is_active", t.boolean, (c) => c.notNull())
      .addColumn("created_by", t.uuid)
      .addColumn("updated_by", t.uuid)
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("webhook_endpoints_library_idx")
      .on("webhook_endpoints")
      .columns(["library_id", "created_at"])
      .execute();

    await db.schema
      .createTable("webhook_messages")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, (c) =>
        c.notNull().references("organizations.id").onDelete("cascade"),
      )
      .addColumn("library_id", t.uuid, (c) => c.notNull())
      .addColumn("video_id", t.uuid)
      .addColumn("event", "text", (c) => c.notNull())
      .addColumn("body", "text", (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .execute();

    await db.schema
      .createTable("webhook_deliveries")
      .addColumn("id", t.uuid, (c) => c.primaryKey())
      .addColumn("message_id", "text", (c) =>
        c.notNull().references("webhook_messages.id").onDelete("cascade"),
      )
      .addColumn("endpoint_id", t.uuid, (c) =>
        c.notNull().references("webhook_endpoints.id").onDelete("cascade"),
      )
      .addColumn("organization_id", t.uuid, (c) => c.notNull())
      .addColumn("library_id", t.uuid, (c) => c.notNull())
      .addColumn("video_id", t.uuid)
      .addColumn("event", "text", (c) => c.notNull())
      .addColumn("attempt", "integer", (c) => c.notNull())
      .addColumn("state", "text", (c) => c.notNull())
      .addColumn("due_at", t.timestamp, (c) => c.notNull())
      .addColumn("locked_until", t.timestamp)
      .addColumn("success", t.boolean, (c) => c.notNull())
      .addColumn("response_status", "integer")
      .addColumn("response_body", "text")
      .addColumn("error", "text")
      .addColumn("duration_ms", "integer")
      .addColumn("next_retry_at", t.timestamp)
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("webhook_deliveries_due_idx")
      .on("webhook_deliveries")
      .columns(["state", "due_at"])
      .execute();
    await db.schema
      .createIndex("webhook_deliveries_endpoint_idx")
      .on("webhook_deliveries")
      .columns(["endpoint_id", "created_at"])
      .execute();
  },
});
