import type { Kysely } from "kysely";
import type { Database } from "../store/tables.ts";
import type { Executor } from "../store/transactions.ts";

/** Console users (those with an email), their sessions and invitations. */
export class UserRepository {
  constructor(readonly db: Kysely<Database>) {}

  findByEmail(email: string) {
    return this.db
      .selectFrom("users")
      .selectAll()
      .where("email", "=", email)
      .where("email", "<>", "")
      .executeTakeFirst();
  }

  findConsoleUser(id: number, executor: Executor = this.db) {
    return executor
      .selectFrom("users")
      .selectAll()
      .where("id", "=", id)
      .where("email", "<>", "")
      .executeTakeFirst();
  }

  async emailTaken(executor: Executor, email: string): Promise<boolean> {
    const row = await executor.selectFrom("users").select("id").where("email", "=", email).executeTakeFirst();
    return row !== undefined;
  }

  /** Every console user's id and email, across organizations. */
  allEmails() {
    return this.db.selectFrom("users").select(["id", "email"]).where("email", "<>", "").execute();
  }

  listConsoleUsers(organizationId: string) {
    return this.db
      .selectFrom("users")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .where("email", "<>", "")
      .orderBy("id")
      .execute();
  }

  async setPassword(executor: Executor, userId: number, passwordHash: string): Promise<void> {
    await executor
      .updateTable("users")
      .set({ password_hash: passwordHash })
      .where("id", "=", userId)
      .execute();
  }

  /** Deletes a console user (never an organization's built-in one); sessions and invitations go with it. */
  async deleteConsoleUser(executor: Executor, id: number): Promise<boolean> {
    const result = await executor
      .deleteFrom("users")
      .where("id", "=", id)
      .where("email", "<>", "")
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** Ids of the live keys acting as this user (cloud tokens it created), which go when it is removed. */
  async liveKeyIds(executor: Executor, userId: number): Promise<number[]> {
    const rows = await executor
      .selectFrom("api_keys")
      .select("id")
      .where("user_id", "=", userId)
      .where("revoked_at", "is", null)
      .execute();
    return rows.map((row) => row.id);
  }

  async insertSession(
    executor: Executor,
    row: { user_id: number; token_hash: string; created_at: string; expires_at: string },
  ): Promise<void> {
    await executor
      .insertInto("console_sessions")
      .values({ ...row, last_seen_at: row.created_at })
      .execute();
  }

  /** Deletes sessions idle since before `before` or expired by then; returns how many went. */
  async pruneSessions(before: string): Promise<number> {
    const result = await this.db
      .deleteFrom("console_sessions")
      .where((eb) => eb.or([eb("last_seen_at", "<", before), eb("expires_at", "<", before)]))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  async deleteUserSessions(executor: Executor, userId: number): Promise<void> {
    await executor.deleteFrom("console_sessions").where("user_id", "=", userId).execute();
  }

  async insertInvitation(
    executor: Executor,
    row: { user_id: number; token_hash: string; created_at: string; expires_at: string },
  ): Promise<void> {
    await executor.insertInto("console_invitations").values(row).execute();
  }

  findInvitation(executor: Executor, tokenHash: string) {
    return executor
      .selectFrom("console_invitations")
      .selectAll()
      .where("token_hash", "=", tokenHash)
      .executeTakeFirst();
  }

  /** Marks the invitation used, only if it still is unused and unexpired (one of two racing accepts wins). */
  async acceptInvitation(executor: Executor, id: number, now: string): Promise<boolean> {
    const result = await executor
      .updateTable("console_invitations")
      .set({ accepted_at: now })
      .where("id", "=", id)
      .where("accepted_at", "is", null)
      .where("expires_at", ">", now)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }
}
