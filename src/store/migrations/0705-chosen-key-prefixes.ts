import { type Migration, sql } from "kysely";

/**
 * The display prefix of a key someone chose (not `cmk_...`) was its first 12 characters, most of a
 * 20-character bootstrap key, and every key of the organization lists it. Such prefixes are cut to
 * the 5 characters a quarter of the shortest chosen key allows (`displayPrefix`); the key's length
 * is not stored, so none can be kept longer.
 */
export const chosenKeyPrefixesMigration = (): Migration => ({
  async up(db) {
    await db
      .updateTable("api_keys")
      .set({ prefix: sql`substr(prefix, 1, 5)` })
      .where(sql<boolean>`substr(prefix, 1, 4) <> 'cmk_'`)
      .execute();
  },
});
