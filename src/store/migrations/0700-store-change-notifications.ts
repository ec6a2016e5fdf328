import { type Migration, sql } from "kysely";
import type { DialectName } from "../database.ts";

/** The PostgreSQL channel on which every commit that changes a stored answer is announced. */
export const STORE_CHANGES_CHANNEL = "cumulo_store_changes";

/** The CDN's traffic rollups, per distribution and per organization. */
export const TRAFFIC_ROLLUPS = [
  "cdn_traffic_minutes",
  "cdn_traffic_five_minutes",
  "cdn_traffic_quarter_hours",
  "cdn_traffic_hours",
  "cdn_traffic_days",
  "cdn_organization_traffic_minutes",
  "cdn_organization_traffic_five_minutes",
  "cdn_organization_traffic_quarter_hours",
  "cdn_organization_traffic_hours",
  "cdn_organization_traffic_days",
];

/**
 * Tables whose changes are not announced: written all the time, and read by no route whose answers
 * are kept (`storedDataOnly`): the webhook delivery queue and the dispatchers' slow endpoints (read
 * by workers alone, migration 0711), every traffic rollup (announced apart by migration 0701, for kept
 * analytics buckets), console sessions (checked on every request) and the job queue. Every other table
 * must carry the trigger; `test/core/store-changes.test.ts` checks that a new table made that choice.
 */
export const UNANNOUNCED_TABLES = [
  "webhook_messages",
  "webhook_deliveries",
  "webhook_slow_endpoints",
  ...TRAFFIC_ROLLUPS,
  "console_sessions",
  "jobs",
  "kysely_migration",
  "kysely_migration_lock",
];

/** The name of the trigger each announced table carries. */
export const CHANGE_TRIGGER = "cumulo_store_changes";

/**
 * PostgreSQL announces, on `STORE_CHANGES_CHANNEL`, every statement that changes an announced table,
 * whoever runs it: any node, the CLI, an operator's SQL, cascades. The notification is sent when its
 * transaction commits (never for one that rolls back), so every node can keep answers exactly
 * (src/store/pg-change-generation.ts). SQLite needs none of this: its `data_version` says as much.
 */
export const storeChangeNotificationsMigration = (dialect: DialectName): Migration => ({
  async up(db) {
    if (dialect !== "postgres") return;
    await sql`
      create function cumulo_notify_store_changes() returns trigger language plpgsql as $$
      begin
        perform pg_notify(${sql.lit(STORE_CHANGES_CHANNEL)}, '');
        return null;
      end
      $$`.execute(db);
    const { rows } = await sql<{ name: string }>`
      select tablename as name from pg_tables where schemaname = current_schema() order by tablename`.execute(
      db,
    );
    for (const { name } of rows) {
      if (UNANNOUNCED_TABLES.includes(name)) continue;
      await sql`
        create trigger ${sql.id(CHANGE_TRIGGER)}
        after insert or update or delete or truncate on ${sql.id(name)}
        for each statement execute function cumulo_notify_store_changes()`.execute(db);
    }
  },
});
