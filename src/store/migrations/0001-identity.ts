import type { Migration } from "kysely";
import type { ColumnTypes } from "../columns.ts";

export const identityMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .createTable("organizations")
      .addColumn("id", t.uuid, (c) => c.primaryKey())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();

    await t
      .serialId(db.schema.createTable("users"))
      .addColumn("uuid", t.uuid, (c) => c.notNull().unique())
      .addColumn("organization_id", t.uuid, (c) =>
        c.notNull().references("organizations.id").onDelete("cascade"),
      )
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("email", "text", (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema.createIndex("users_organization_idx").on("users").column("organization_id").execute();

    await t
      .serialId(db.schema.createTable("billing_accounts"))
      .addColumn("organization_id", t.uuid, (c) =>
        c.notNull().references("organizations.id").onDelete("cascade"),
      )
      .addColumn("display_name", "text", (c) => c.notNull())
      .addColumn("is_default", t.boolean, (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("billing_accounts_organization_idx")
      .on("billing_accounts")
      .column("organization_id")
      .execute();

    await t
      .serialId(db.schema.createTable("api_keys"))
      .addColumn("organization_id", t.uuid, (c) =>
        c.notNull().references("organizations.id").onDelete("cascade"),
      )
      .addColumn("user_id", "integer", (c) => c.notNull().references("users.id").onDelete("cascade"))
      .addColumn("kind", "text", (c) => c.notNull())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("description", "text", (c) => c.notNull())
      .addColumn("prefix", "text", (c) => c.notNull())
      .addColumn("key_hash", "text", (c) => c.notNull().unique())
      .addColumn("read_only", t.boolean, (c) => c.notNull())
      .addColumn("restricted", t.boolean, (c) => c.notNull())
      .addColumn("billing_account_id", "integer", (c) =>
        c.references("billing_accounts.id").onDelete("set null"),
      )
      .addColumn("consumer_id", t.uuid, (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .addColumn("expires_at", t.timestamp)
      .addColumn("revoked_at", t.timestamp)
      .execute();
    await db.schema
      .createIndex("api_keys_organization_idx")
      .on("api_keys")
      .columns(["organization_id", "kind"])
      .execute();
  },
});
