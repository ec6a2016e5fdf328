import type { Migration } from "kysely";
import { searchKey } from "../../media/repository.ts";

/**
 * A library's name as its search compares it (`searchKey`), kept beside the name: neither store's
 * `lower()` folds case as the other's does (SQLite folds ASCII only; PostgreSQL as its locale says),
 * so the name is folded once, here, the same way for both.
 */
export const librarySearchNamesMigration = (): Migration => ({
  async up(db) {
    await db.schema
      .alterTable("libraries")
      .addColumn("search_name", "text", (c) => c.notNull().defaultTo(""))
      .execute();
    const libraries: { id: string; name: string }[] = await db
      .selectFrom("libraries")
      .select(["id", "name"])
      .execute();
    for (const { id, name } of libraries) {
      await db
        .updateTable("libraries")
        .set({ search_name: searchKey(name) })
        .where("id", "=", id)
        .execute();
    }
  },
});
