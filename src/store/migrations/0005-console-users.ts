import { type Migration, sql } from "kysely";
import type { ColumnTypes } from "../columns.ts";

/** People who sign in to the console: passwords, read-only flags, sessions, invitations; keys' last use. */
export const consoleUsersMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema.alterTable("users").addColumn("password_hash", "text").execute();
    await db.schema
      .alterTable("users")
      .addColumn("read_only", t.boolean, (c) => c.notNull().defaultTo(t.dialect === "postgres" ? false : 0))
      .execute();
    // Console users sign in by email alone, so an email names one user across organizations. The
    // organization's built-in user (the owner of its API keys) has no email.
    await db.schema
      .createIndex("users_email_idx")
      .on("users")
      .column("email")
      .unique()
      .where(sql.ref("email"), "<>", "")
      .execute();

    await db.schema.alterTable("api_keys").addColumn("last_used_at", t.timestamp).execute();

    await t
      .serialId(db.schema.createTable("console_sessions"))
      .addColumn("user_id", "integer", (c) => c.notNull().references("users.id").onDelete("cascade"))
      .addColumn("token_hash", "text", (c) => c.notNull().unique())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("last_seen_at", t.timestamp, (c) => c.notNull())
      .addColumn("expires_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("console_sessions_user_idx")
      .on("console_sessions")
      .column("user_id")
      .execute();

    await t
      .serialId(db.schema.createTable("console_invitations"))
      .addColumn("user_id", "integer", (c) => c.notNull().references("users.id").onDelete("cascade"))
      .addColumn("token_hash", "text", (c) => c.notNull().unique())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("expires_at", t.timestamp, (c) => c.notNull())
      .addColumn("accepted_at", t.timestamp)
      .execute();
    await db.schema
      .createIndex("console_invitations_user_idx")
      .on("console_invitations")
      .column("user_id")
      .execute();
  },
});
