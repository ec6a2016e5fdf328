import { type Migration, sql } from "kysely";
import type { DialectName } from "../database.ts";

/** The PostgreSQL channel on which every change to a key's verification is announced. */
export const KEY_CHANGES_CHANNEL = "cumulo_key_changes";

/**
 * PostgreSQL announces every statement that can change what a key check answers (revocation,
 * expiry, restriction, billing account, deletion, also by the CLI, by cascades or by hand) on
 * `KEY_CHANGES_CHANNEL`. A notification is sent when its transaction commits, so nodes without Redis
 * can cache verified keys exactly (src/identity/auth-cache.ts). `last_used_at` is not listed: it is
 * written as keys are used and changes nothing a check answers. SQLite needs none of this (its
 * caches read `PRAGMA data_version`).
 */
export const identityKeyNotificationsMigration = (dialect: DialectName): Migration => ({
  async up(db) {
    if (dialect !== "postgres") return;
    await sql`
      create function cumulo_notify_key_changes() returns trigger language plpgsql as $$
      begin
        perform pg_notify(${sql.lit(KEY_CHANGES_CHANNEL)}, '');
        return null;
      end
      $$`.execute(db);
    await sql`
      create trigger api_keys_changes
      after update of organization_id, user_id, kind, key_hash, read_only, restricted,
        billing_account_id, expires_at, revoked_at or delete or truncate
      on api_keys for each statement execute function cumulo_notify_key_changes()`.execute(db);
  },
});
