import { type Migration, sql } from "kysely";
import type { DialectName } from "../database.ts";
import { STORE_CHANGES_CHANNEL, TRAFFIC_ROLLUPS } from "./0700-store-change-notifications.ts";

/** The payload of a traffic rollup's change on `STORE_CHANGES_CHANNEL`; other tables' changes carry none. */
export const TRAFFIC_CHANGE_PAYLOAD = "traffic";

/** The name of the trigger each traffic rollup carries. */
export const TRAFFIC_CHANGE_TRIGGER = "cumulo_traffic_changes";

/**
 * PostgreSQL announces the traffic rollups' changes too, apart from the others (with a payload of
 * their own): kept answers leave them out, since every edge node's flush writes them every few
 * seconds, while kept analytics buckets follow them (src/store/pg-change-generation.ts). PostgreSQL
 * folds a transaction's identical notifications into one, so a flush announces once.
 */
export const trafficChangeNotificationsMigration = (dialect: DialectName): Migration => ({
  async up(db) {
    if (dialect !== "postgres") return;
    await sql`
      create function cumulo_notify_traffic_changes() returns trigger language plpgsql as $$
      begin
        perform pg_notify(${sql.lit(STORE_CHANGES_CHANNEL)}, ${sql.lit(TRAFFIC_CHANGE_PAYLOAD)});
        return null;
      end
      $$`.execute(db);
    for (const name of TRAFFIC_ROLLUPS) {
      await sql`
        create trigger ${sql.id(TRAFFIC_CHANGE_TRIGGER)}
        after insert or update or delete or truncate on ${sql.id(name)}
        for each statement execute function cumulo_notify_traffic_changes()`.execute(db);
    }
  },
});
