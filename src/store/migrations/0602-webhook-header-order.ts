import { type Migration, sql } from "kysely";
import type { DialectName } from "../database.ts";

/**
 * An endpoint's custom headers come back in the order they were given, on PostgreSQL as on SQLite:
 * `jsonb` sorts an object's keys (shorter first), `json` keeps the text as written. Headers stored
 * before this keep the order `jsonb` gave them.
 */
export const webhookHeaderOrderMigration = (dialect: DialectName): Migration => ({
  async up(db) {
    if (dialect !== "postgres") return;
    await sql`alter table webhook_endpoints alter column headers type json using headers::json`.execute(db);
  },
});
