import type { Migration } from "kysely";

/**
 * Console users' emails in Unicode NFC, as `normalizeEmail` now keeps them: one visible address
 * typed with a precomposed letter (`ä`) or a decomposed one (`a` and U+0308) made two accounts, and
 * an account made from the decomposed form could not sign in with the usual one. An email whose NFC
 * form another user already has is left as it is (the two were two accounts before): rewriting it
 * would break the uniqueness of emails.
 */
export const consoleEmailsNfcMigration = (): Migration => ({
  async up(db) {
    const users = await db.selectFrom("users").select(["id", "email"]).where("email", "<>", "").execute();
    const taken = new Set(users.map((user) => user.email));
    for (const user of users) {
      const normalized = user.email.normalize("NFC");
      if (normalized === user.email || taken.has(normalized)) continue;
      await db.updateTable("users").set({ email: normalized }).where("id", "=", user.id).execute();
      taken.add(normalized);
    }
  },
});
