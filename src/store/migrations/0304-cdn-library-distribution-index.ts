import type { Migration } from "kysely";

/**
 * A library's own distribution is found by its library (the edge, for `{library_id}.{media domain}`
 * after `CUMULO_MEDIA_DOMAIN` changed): without this index each such lookup read every distribution.
 */
export const cdnLibraryDistributionIndexMigration = (): Migration => ({
  async up(db) {
    await db.schema
      .createIndex("cdn_distributions_library_idx")
      .on("cdn_distributions")
      .column("library_id")
      .execute();
  },
});
