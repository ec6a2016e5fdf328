import { type Insertable, type Kysely, type Selectable, sql, type Updateable } from "kysely";
import type { Page } from "../http/pagination.ts";
import { touchedOnlyWhenChanged } from "../store/changes.ts";
import type { DialectName } from "../store/database.ts";
import { selectPage } from "../store/paging.ts";
import { columnsOf, PreparedQuery, type ValueOf, valuesOf } from "../store/prepared.ts";
import type { Database } from "../store/tables.ts";
import type { Executor } from "../store/transactions.ts";
import type { LibraryTable } from "./tables.ts";

export interface LibraryFilters {
  defaultPrivacy?: LibraryTable["default_privacy"];
  createdFrom?: string;
  createdTo?: string;
  search?: string;
}

/**
 * Text as a case-insensitive search compares it, the same on both stores: composed (NFC), then the
 * upper case of its lower case, composed again. Upper case last, not lower: a final sigma lowers to
 * ς, a sigma before a letter to σ, so a term cut after a sigma would not be found; ß becomes SS as
 * STRASSE expects. Lower case first, for capitals whose own upper case is themselves while their
 * lower case's is not: ẞ (ß, then SS), the Kelvin sign (k), İ (i and a combining dot).
 */
export const searchKey = (text: string): string =>
  text.normalize("NFC").toLowerCase().toUpperCase().normalize("NFC");

/** `%`, `_` and the escape character itself match literally in a LIKE pattern. */
export const likeContains = (text: string): string => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

type LibraryChanges = Omit<Updateable<LibraryTable>, "search_name">;

interface LibraryUpdate {
  organizationId: string;
  id: string;
  changes: Updateable<LibraryTable>;
}

export class LibraryRepository {
  constructor(
    readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
  ) {}

  // Built and compiled once per set of changed columns: library and security settings updates run
  // it, and building it cost more than SQLite takes to run it (docs/performance.md, session 7).
  readonly #updateLibrary = new PreparedQuery<LibraryUpdate, Selectable<LibraryTable>>(
    (value: ValueOf<LibraryUpdate>, { changes }) =>
      this.db
        .updateTable("libraries")
        .set(touchedOnlyWhenChanged(valuesOf(value, changes, (values) => values.changes)))
        .where(
          "organization_id",
          "=",
          value((values) => values.organizationId),
        )
        .where(
          "id",
          "=",
          value((values) => values.id),
        )
        .returningAll(),
    ({ changes }) => columnsOf(changes).join(),
  );

  /** The library if it belongs to the organization; another tenant's library does not exist for it. */
  findLibrary(organizationId: string, id: string, executor: Executor = this.db) {
    return executor
      .selectFrom("libraries")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .where("id", "=", id)
      .executeTakeFirst();
  }

  /**
   * Like `findLibrary`, and holds the library row's lock until the transaction ends (on PostgreSQL
   * the lock an update takes; SQLite runs one write transaction at a time), so changes that keep a
   * per-library rule (one default player) run one at a time.
   */
  lockLibrary(executor: Executor, organizationId: string, id: string) {
    return executor
      .selectFrom("libraries")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .where("id", "=", id)
      .$if(this.dialect === "postgres", (qb) => qb.forNoKeyUpdate())
      .executeTakeFirst();
  }

  /**
   * Takes the library row's lock (as `lockLibrary`) for the rest of the transaction. Folder and
   * video moves and folder deletions take it, so a video cannot move into a folder that a
   * concurrent bulk delete is removing (which would otherwise fail that delete on the folder
   * reference).
   */
  async lockById(executor: Executor, id: string): Promise<void> {
    if (this.dialect !== "postgres") return;
    await executor.selectFrom("libraries").select("id").where("id", "=", id).forNoKeyUpdate().execute();
  }

  /**
   * Holds the library against its deletion (a share lock, which other additions share) for the rest
   * of the transaction. A write that adds to the library and notifies its webhooks takes it first:
   * it then waits for a deletion under way (and finds the library gone), or the deletion waits for
   * it; otherwise each could hold a lock the other needs (the library's row, its endpoints).
   */
  async holdAgainstDeletion(executor: Executor, id: string): Promise<void> {
    if (this.dialect !== "postgres") return;
    await executor.selectFrom("libraries").select("id").where("id", "=", id).forShare().execute();
  }

  async insert(executor: Executor, row: Omit<Insertable<LibraryTable>, "search_name">): Promise<void> {
    await executor
      .insertInto("libraries")
      .values({ ...row, search_name: searchKey(row.name) })
      .execute();
  }

  /**
   * Changes the library if it belongs to the organization, in one statement (its own transaction):
   * the row as changed, or undefined when there is none.
   */
  updateLibrary(organizationId: string, id: string, changes: LibraryChanges) {
    const searchName = changes.name === undefined ? {} : { search_name: searchKey(changes.name) };
    return this.#updateLibrary.first(this.db, { organizationId, id, changes: { ...changes, ...searchName } });
  }

  /**
   * Gives every library the search name of its current name. Nodes of a version before migration
   * 0104 that still run during a rolling upgrade write libraries without one (or rename them without
   * changing it), and search never found those libraries; each start puts them right. Reads every
   * library's name: a few milliseconds per thousand libraries. Returns how many it changed.
   */
  async refreshSearchNames(): Promise<number> {
    const libraries = await this.db.selectFrom("libraries").select(["id", "name", "search_name"]).execute();
    const stale = libraries.filter((library) => library.search_name !== searchKey(library.name));
    for (const { id, name } of stale) {
      await this.db
        .updateTable("libraries")
        .set({ search_name: searchKey(name) })
        .where("id", "=", id)
        .where("name", "=", name)
        .execute();
    }
    return stale.length;
  }

  /** Moves a library from one status to another; false when it was no longer in `from`. */
  async transition(id: string, from: LibraryTable["status"], to: LibraryTable["status"], now: string) {
    const result = await this.db
      .updateTable("libraries")
      .set({ status: to, updated_at: now })
      .where("id", "=", id)
      .where("status", "=", from)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Whether the library's distribution row exists (it is created with the library). */
  async hasDistribution(libraryId: string, distributionId: string): Promise<boolean> {
    const row = await this.db
      .selectFrom("cdn_distributions")
      .select("id")
      .where("id", "=", distributionId)
      .where("library_id", "=", libraryId)
      .executeTakeFirst();
    return row !== undefined;
  }

  findById(id: string) {
    return this.db.selectFrom("libraries").selectAll().where("id", "=", id).executeTakeFirst();
  }

  list(organizationId: string, filters: LibraryFilters, page: Page) {
    let query = this.db.selectFrom("libraries").selectAll().where("organization_id", "=", organizationId);
    if (filters.defaultPrivacy) query = query.where("default_privacy", "=", filters.defaultPrivacy);
    if (filters.createdFrom) query = query.where("created_at", ">=", filters.createdFrom);
    if (filters.createdTo) query = query.where("created_at", "<=", filters.createdTo);
    if (filters.search) {
      query = query.where(
        sql<boolean>`search_name like ${likeContains(searchKey(filters.search))} escape '\\'`,
      );
    }
    return selectPage(query.orderBy("created_at", "desc").orderBy("id", "desc"), page);
  }

  /** Removes the library row; its content is removed first by the caller, in the same transaction. */
  async delete(executor: Executor, id: string): Promise<void> {
    await executor.deleteFrom("libraries").where("id", "=", id).execute();
  }
}
