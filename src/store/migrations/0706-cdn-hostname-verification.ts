import type { Migration } from "kysely";
import { newHostnameToken } from "../../cdn/hostname-verification.ts";
import type { ColumnTypes } from "../columns.ts";

/**
 * Host name verification (CUMULO_CDN_HOSTNAME_VERIFICATION=dns): each customer distribution gets its
 * TXT token and the time its name was verified. Distributions made before were served first come, and
 * stay served: they are recorded as verified when they were created, each with a token of its own.
 */
export const cdnHostnameVerificationMigration = (t: ColumnTypes): Migration => ({
  async up(db) {
    await db.schema.alterTable("cdn_distributions").addColumn("hostname_token", "text").execute();
    await db.schema.alterTable("cdn_distributions").addColumn("hostname_verified_at", t.timestamp).execute();
    await db
      .updateTable("cdn_distributions")
      .set((eb) => ({ hostname_verified_at: eb.ref("created_at") }))
      .where("library_id", "is", null)
      .execute();
    const customerRows = await db
      .selectFrom("cdn_distributions")
      .select("id")
      .where("library_id", "is", null)
      .execute();
    for (const row of customerRows) {
      await db
        .updateTable("cdn_distributions")
        .set({ hostname_token: newHostnameToken() })
        .where("id", "=", row.id)
        .execute();
    }
  },
});
