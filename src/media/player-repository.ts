import type { Insertable, Kysely, Updateable } from "kysely";
import type { Page } from "../http/pagination.ts";
import { touchedOnlyWhenChanged } from "../store/changes.ts";
import { selectPage } from "../store/paging.ts";
import type { Database } from "../store/tables.ts";
import type { Executor } from "../store/transactions.ts";
import type { PlayerTable } from "./tables.ts";

export class PlayerRepository {
  constructor(readonly db: Kysely<Database>) {}

  find(libraryId: string, id: string, executor: Executor = this.db) {
    return executor
      .selectFrom("media_players")
      .selectAll()
      .where("library_id", "=", libraryId)
      .where("id", "=", id)
      .executeTakeFirst();
  }

  findDefault(libraryId: string, executor: Executor = this.db) {
    return executor
      .selectFrom("media_players")
      .selectAll()
      .where("library_id", "=", libraryId)
      .where("is_default", "=", true)
      .executeTakeFirst();
  }

  async count(executor: Executor, libraryId: string): Promise<number> {
    const row = await executor
      .selectFrom("media_players")
      .select((eb) => eb.fn.countAll<number>().as("total"))
      .where("library_id", "=", libraryId)
      .executeTakeFirstOrThrow();
    return Number(row.total);
  }

  list(libraryId: string, page: Page) {
    return selectPage(
      this.db
        .selectFrom("media_players")
        .selectAll()
        .where("library_id", "=", libraryId)
        .orderBy("created_at", "desc")
        .orderBy("id", "desc"),
      page,
    );
  }

  async insert(executor: Executor, row: Insertable<PlayerTable>): Promise<void> {
    await executor.insertInto("media_players").values(row).execute();
  }

  /** Changes the player; the row as it is now, or undefined when it is gone. */
  update(executor: Executor, id: string, changes: Updateable<PlayerTable>) {
    return executor
      .updateTable("media_players")
      .set(touchedOnlyWhenChanged(changes))
      .where("id", "=", id)
      .returningAll()
      .executeTakeFirst();
  }

  /** The library's default player, but for `defaultId`, is its default no longer. */
  async clearDefaultBut(
    executor: Executor,
    libraryId: string,
    defaultId: string,
    now: string,
  ): Promise<void> {
    await executor
      .updateTable("media_players")
      .set({ is_default: false, updated_at: now })
      .where("library_id", "=", libraryId)
      .where("is_default", "=", true)
      .where("id", "!=", defaultId)
      .execute();
  }

  async delete(executor: Executor, id: string): Promise<void> {
    await executor.deleteFrom("media_players").where("id", "=", id).execute();
  }

  async deleteLibrary(executor: Executor, libraryId: string): Promise<void> {
    await executor.deleteFrom("media_players").where("library_id", "=", libraryId).execute();
  }
}
