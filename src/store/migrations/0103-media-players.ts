import { type Migration, sql } from "kysely";
import type { ColumnTypes } from "../columns.ts";

export const mediaPlayersMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema
      .createTable("media_players")
      .addColumn("id", t.uuid, (c) => c.primaryKey())
      .addColumn("organization_id", t.uuid, (c) => c.notNull())
      .addColumn("library_id", t.uuid, (c) => c.notNull().references("libraries.id").onDelete("cascade"))
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("theme", t.json, (c) => c.notNull())
      .addColumn("is_default", t.boolean, (c) => c.notNull())
      .addColumn("created_at", t.timestamp, (c) => c.notNull())
      .addColumn("updated_at", t.timestamp, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("media_players_library_idx")
      .on("media_players")
      .columns(["library_id", "created_at"])
      .execute();
    // At most one default per library, enforced by the store itself (partial index: SQLite and PostgreSQL).
    await sql`create unique index media_players_one_default on media_players (library_id) where is_default`.execute(
      db,
    );
  },
});
