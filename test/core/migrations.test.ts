import { Migrator, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/store/database.ts";
import { allMigrations } from "../../src/store/migrations/index.ts";
import { capturingLogger } from "../fuzz/log-capture.ts";
import { createLibrary } from "../media/helpers.ts";
import { startTestApp } from "../support/app.ts";
import { createTestStore, type TestStore } from "../support/store.ts";

/** A store upgraded in place: rows written before a migration read back as the new code expects. */
describe("migrations over existing rows", () => {
  let testStore: TestStore;
  let store: Store;

  beforeAll(async () => {
    testStore = await createTestStore();
    store = openStore({ dataDir: testStore.dataDir, databaseUrl: testStore.databaseUrl });
  });
  afterAll(async () => {
    await store.close();
    await testStore.drop();
  });

  it("gives libraries made before 0104 their search names", async () => {
    const every = allMigrations(store.dialect);
    const migrator = (names: string[]) =>
      new Migrator({
        db: store.db,
        provider: { getMigrations: async () => Object.fromEntries(names.map((name) => [name, every[name]])) },
        allowUnorderedMigrations: true,
      });
    const before = Object.keys(every).filter((name) => name < "0104");
    expect((await migrator(before).migrateToLatest()).error).toBeUndefined();
    const now = new Date().toISOString();
    const organizationId = "00000000-0000-4000-8000-000000000001";
    await store.db
      .insertInto("organizations")
      .values({ id: organizationId, name: "Before", created_at: now, updated_at: now })
      .execute();
    const oldLibrary = { id: "00000000-0000-4000-8000-000000000002", name: "Élan ΣΊΣΥΦΟΣ" };
    // Written as the code of that time wrote it: no search name.
    await store.db
      .insertInto("libraries")
      .values({
        ...oldLibrary,
        organization_id: organizationId,
        description: "",
        usage_type: "video_on_demand",
        default_privacy: "public",
        status: "active",
        region: "eu-central",
        distribution_id: null,
        whitelist_referrers: "{}",
        blocked_countries: "{}",
        video_privacy: "public",
        created_by: organizationId,
        updated_by: null,
        created_at: now,
        updated_at: now,
      } as never)
      .execute();

    // It names what it applied, so `cumulo migrate` can say what an upgrade changed.
    const applied = await store.migrate();
    expect(applied).toContain("0104-library-search-names");
    expect(applied).not.toContain("0001-identity");
    expect(await store.migrate()).toEqual([]);
    const row = await store.db
      .selectFrom("libraries")
      .select(["name", "search_name"])
      .where("id", "=", oldLibrary.id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ name: oldLibrary.name, search_name: "ÉLAN ΣΊΣΥΦΟΣ" });
  });
});

/** A downgrade: a node of an older version started on a store a newer Cumulo migrated. */
describe("migration 0707-video-uploads-by-video", () => {
  it("indexes uploads by their video, which each new upload and each video's delete look them up by", async () => {
    const testStore = await createTestStore();
    const store = openStore({ dataDir: testStore.dataDir, databaseUrl: testStore.databaseUrl });
    try {
      await store.migrate();
      const query =
        store.dialect === "sqlite"
          ? sql<{ name: string }>`select name from sqlite_master
              where type = 'index' and tbl_name = 'video_uploads' and sql like '%(%video_id%)%'`
          : sql<{ name: string }>`select indexname as name from pg_indexes
              where schemaname = current_schema() and tablename = 'video_uploads' and indexdef like '%(video_id)%'`;
      const { rows } = await query.execute(store.db);
      expect(rows.map((row) => row.name)).toEqual(["video_uploads_video_idx"]);
    } finally {
      await store.close();
      await testStore.drop();
    }
  });
});

describe("migration 0709-console-emails-nfc", () => {
  it("writes emails stored decomposed in NFC, unless another user already has that form", async () => {
    const testStore = await createTestStore();
    const store = openStore({ dataDir: testStore.dataDir, databaseUrl: testStore.databaseUrl });
    try {
      await store.migrate();
      const organizationId = "00000000-0000-4000-8000-000000000009";
      const now = new Date().toISOString();
      await store.db
        .insertInto("organizations")
        .values({ id: organizationId, name: "Emails", created_at: now, updated_at: now })
        .execute();
      // Written as versions before it wrote them: trimmed and lower-cased only.
      const emails = ["a\u0308nne@example.test", "jo\u0308rg@example.test", "j\u00f6rg@example.test"];
      for (const [n, email] of emails.entries()) {
        await store.db
          .insertInto("users")
          .values({
            uuid: `00000000-0000-4000-8000-00000000001${n}`,
            organization_id: organizationId,
            name: email,
            email,
            created_at: now,
          })
          .execute();
      }
      await sql`delete from kysely_migration where name = '0709-console-emails-nfc'`.execute(store.db);
      expect(await store.migrate()).toEqual(["0709-console-emails-nfc"]);
      const stored = await store.db
        .selectFrom("users")
        .select("email")
        .where("organization_id", "=", organizationId)
        .orderBy("uuid")
        .execute();
      expect(stored.map((row) => row.email)).toEqual([
        "\u00e4nne@example.test",
        "jo\u0308rg@example.test",
        "j\u00f6rg@example.test",
      ]);
      // The one left decomposed cannot sign in: a node starting on the store says which user it is.
      await store.close();
      const { logger, lines } = capturingLogger("warn");
      const app = await startTestApp({}, { store: testStore, logger });
      await app.close();
      const warning = lines.find((line) => String(line.msg).startsWith("console users whose email"));
      const decomposed = await openStore({ dataDir: testStore.dataDir, databaseUrl: testStore.databaseUrl });
      const [left] = await decomposed.db
        .selectFrom("users")
        .select("id")
        .where("email", "=", "jo\u0308rg@example.test")
        .execute();
      await decomposed.close();
      expect(warning).toMatchObject({ users: [left?.id] });
    } finally {
      await store.close().catch(() => undefined);
      await testStore.drop();
    }
  });
});

describe("a store migrated by a newer Cumulo", () => {
  it("is refused, naming the migrations this version does not know, and left as it was", async () => {
    const testStore = await createTestStore();
    const open = () => openStore({ dataDir: testStore.dataDir, databaseUrl: testStore.databaseUrl });
    const store = open();
    try {
      await store.migrate();
      await sql`insert into kysely_migration (name, timestamp) values ('9999-from-the-future', '2030-01-01T00:00:00.000Z')`.execute(
        store.db,
      );
      await expect(store.migrate()).rejects.toThrow(
        "the store was migrated by a newer Cumulo (migrations this version does not know: 9999-from-the-future); run that version or a newer one",
      );
      const names = await sql<{ name: string }>`select name from kysely_migration`.execute(store.db);
      expect(names.rows.map((row) => row.name)).toContain("9999-from-the-future");
    } finally {
      await store.close();
      await testStore.drop();
    }
  });
});

/**
 * A rolling upgrade: `cumulo migrate` has run, and nodes of the version before 0104 still serve until
 * they are replaced. They write libraries without a search name, or rename them without changing it.
 */
describe("libraries an older node wrote after the migration", () => {
  it("are found by search once a node of this version has started", { timeout: 60_000 }, async () => {
    const testStore = await createTestStore();
    const first = await startTestApp({ CUMULO_ROLES: "api" }, { store: testStore });
    let second: Awaited<ReturnType<typeof startTestApp>> | undefined;
    try {
      const made = await createLibrary(first, { name: "Made By An Old Node" });
      const renamed = await createLibrary(first, { name: "Before The Rename" });
      const { db } = first.cumulo.store;
      // As the older version wrote them: no search name, a search name of the previous name.
      await db.updateTable("libraries").set({ search_name: "" }).where("id", "=", made.id).execute();
      await db
        .updateTable("libraries")
        .set({ name: "Renamed By An Old Node" })
        .where("id", "=", renamed.id)
        .execute();
      const found = async (t: typeof first, search: string) =>
        (await t.request("GET", `/v1/media/libraries?search=${encodeURIComponent(search)}`)).body.data.map(
          (library: { id: string }) => library.id,
        );
      expect(await found(first, "old node")).toEqual([]);

      second = await startTestApp({ CUMULO_ROLES: "api" }, { store: testStore });
      expect((await found(second, "old node")).sort()).toEqual([made.id, renamed.id].sort());
      expect(await found(second, "before the rename")).toEqual([]);
    } finally {
      await second?.close();
      await first.close();
      await testStore.drop();
    }
  });
});
