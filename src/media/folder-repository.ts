import type { Insertable, Kysely, Updateable } from "kysely";
import type { Page } from "../http/pagination.ts";
import { touchedOnlyWhenChanged } from "../store/changes.ts";
import { chunksOf } from "../store/chunks.ts";
import { selectPage } from "../store/paging.ts";
import type { Database } from "../store/tables.ts";
import type { Executor } from "../store/transactions.ts";
import type { FolderTable } from "./tables.ts";

export class FolderRepository {
  constructor(readonly db: Kysely<Database>) {}

  find(libraryId: string, id: string, executor: Executor = this.db) {
    return executor
      .selectFrom("media_folders")
      .selectAll()
      .where("library_id", "=", libraryId)
      .where("id", "=", id)
      .executeTakeFirst();
  }

  /** How many of `ids` are folders of the library. */
  async countInLibrary(executor: Executor, libraryId: string, ids: string[]): Promise<number> {
    const row = await executor
      .selectFrom("media_folders")
      .select((eb) => eb.fn.countAll<number>().as("total"))
      .where("library_id", "=", libraryId)
      .where("id", "in", ids)
      .executeTakeFirstOrThrow();
    return Number(row.total);
  }

  async insert(executor: Executor, row: Insertable<FolderTable>): Promise<void> {
    await executor.insertInto("media_folders").values(row).execute();
  }

  /** Changes the folder; the row as it is now, or undefined when it is gone. */
  update(executor: Executor, id: string, changes: Updateable<FolderTable>) {
    return executor
      .updateTable("media_folders")
      .set(touchedOnlyWhenChanged(changes))
      .where("id", "=", id)
      .returningAll()
      .executeTakeFirst();
  }

  list(libraryId: string, parentId: string | undefined, page: Page) {
    let query = this.db.selectFrom("media_folders").selectAll().where("library_id", "=", libraryId);
    if (parentId) query = query.where("parent_id", "=", parentId);
    return selectPage(query.orderBy("created_at", "desc").orderBy("id", "desc"), page);
  }

  /** The given folders of the library and every folder nested below them. */
  async withDescendants(executor: Executor, libraryId: string, ids: string[]): Promise<string[]> {
    const rows = await executor
      .withRecursive("tree(id)", (qb) =>
        qb
          .selectFrom("media_folders")
          .select("id")
          .where("library_id", "=", libraryId)
          .where("id", "in", ids)
          .union(
            qb
              .selectFrom("media_folders as child")
              .innerJoin("tree", "tree.id", "child.parent_id")
              .select("child.id"),
          ),
      )
      .selectFrom("tree")
      .select("id")
      .execute();
    return rows.map((row) => row.id);
  }

  /** Deletes folders; children first is not needed since every id of a subtree is given. */
  /**
   * Deletes the folders, every one of them unhooked from its parent first: each deletion would
   * otherwise delete its subfolders by the foreign key's cascade, one nested trigger per level,
   * and SQLite refuses more than 1000 levels (a chain of 1010 folders could not be deleted, nor its
   * library: QA of 5 December, session 42).
   */
  async deleteMany(executor: Executor, ids: string[]): Promise<void> {
    for (const chunk of chunksOf(ids)) {
      await executor.updateTable("media_folders").set({ parent_id: null }).where("id", "in", chunk).execute();
    }
    for (const chunk of chunksOf(ids)) {
      await executor.deleteFrom("media_folders").where("id", "in", chunk).execute();
    }
  }

  /** Deletes every folder of the library, unhooked from their parents first (as `deleteMany`). */
  async deleteLibrary(executor: Executor, libraryId: string): Promise<void> {
    await executor
      .updateTable("media_folders")
      .set({ parent_id: null })
      .where("library_id", "=", libraryId)
      .execute();
    await executor.deleteFrom("media_folders").where("library_id", "=", libraryId).execute();
  }
}
