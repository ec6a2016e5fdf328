import { randomUUID } from "node:crypto";
import { Migrator } from "kysely";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/store/database.ts";
import { allMigrations } from "../../src/store/migrations/index.ts";
import { createTestStore, type TestStore } from "../support/store.ts";

const ROLLUPS = "0302-cdn-traffic-rollups";
// Fills its tables from the organization minute rows that ROLLUPS creates: it runs after it.
const FIVE_MINUTES = "0303-cdn-traffic-five-minutes";
const counters = (requests: number) => ({
  requests,
  sent_bytes: requests * 100,
  upstream_bytes: requests * 10,
  origin_time_ms: requests * 7,
  origin_fetches: 1,
  responses_2xx: requests,
  responses_3xx: 0,
  responses_4xx: 0,
  responses_5xx: 0,
});

describe("CDN rollups migration", () => {
  let testStore: TestStore;
  let store: Store;
  beforeEach(async () => {
    testStore = await createTestStore();
    store = openStore({ dataDir: testStore.dataDir, databaseUrl: testStore.databaseUrl });
  });
  afterEach(async () => {
    await store.close();
    await testStore.drop();
  });

  /** Runs the migrations that sort before `first`, as a database made before it. */
  const migrateBefore = async (first: string) => {
    const migrations = Object.entries(allMigrations(store.dialect)).filter(([name]) => name < first);
    const migrator = new Migrator({
      db: store.db,
      provider: { getMigrations: async () => Object.fromEntries(migrations) },
      allowUnorderedMigrations: true,
    });
    expect((await migrator.migrateToLatest()).error).toBeUndefined();
  };

  const insertOrganization = async () => {
    const organizationId = randomUUID();
    const now = new Date().toISOString();
    await store.db
      .insertInto("organizations")
      .values({ id: organizationId, name: "backfill", created_at: now, updated_at: now })
      .execute();
    return organizationId;
  };

  it("fills the quarter-hour, daily and organization rollups from the traffic stored before it", async () => {
    const { db } = store;
    await migrateBefore(ROLLUPS);
    const organizationId = await insertOrganization();
    const [first, second] = [randomUUID(), randomUUID()];
    const day = 20_000 * 1440; // a UTC midnight, in minutes since the epoch
    // As the flush wrote them before: minute rows and their hourly sums. The first hour's minutes
    // are already past retention (deleted), its hour row is kept.
    const minutes = [
      { distribution_id: first, minute: day + 61, ...counters(3) },
      { distribution_id: first, minute: day + 1439, ...counters(4) },
      { distribution_id: second, minute: day + 61, ...counters(5) },
      { distribution_id: second, minute: day + 1440, ...counters(6) },
    ].map((row) => ({ ...row, organization_id: organizationId }));
    const hours = [
      { distribution_id: first, minute: day, ...counters(2) },
      { distribution_id: first, minute: day + 60, ...counters(3) },
      { distribution_id: first, minute: day + 1380, ...counters(4) },
      { distribution_id: second, minute: day + 60, ...counters(5) },
      { distribution_id: second, minute: day + 1440, ...counters(6) },
    ].map((row) => ({ ...row, organization_id: organizationId }));
    await db.insertInto("cdn_traffic_minutes").values(minutes).execute();
    await db.insertInto("cdn_traffic_hours").values(hours).execute();

    await store.migrate();

    const read = async (
      table:
        | "cdn_traffic_quarter_hours"
        | "cdn_traffic_days"
        | "cdn_organization_traffic_quarter_hours"
        | "cdn_organization_traffic_minutes"
        | "cdn_organization_traffic_hours"
        | "cdn_organization_traffic_days",
    ) =>
      (await db.selectFrom(table).select(["minute", "requests", "origin_fetches"]).execute())
        .map((row) => [Number(row.minute), Number(row.requests), Number(row.origin_fetches)])
        .sort(
          ([minuteA = 0, requestsA = 0], [minuteB = 0, requestsB = 0]) =>
            minuteA - minuteB || requestsA - requestsB,
        );
    expect(await read("cdn_traffic_quarter_hours")).toEqual([
      [day + 60, 3, 1],
      [day + 60, 5, 1],
      [day + 1425, 4, 1],
      [day + 1440, 6, 1],
    ]);
    expect(await read("cdn_organization_traffic_quarter_hours")).toEqual([
      [day + 60, 8, 2],
      [day + 1425, 4, 1],
      [day + 1440, 6, 1],
    ]);
    expect(await read("cdn_traffic_days")).toEqual([
      [day, 5, 1],
      [day, 9, 3],
      [day + 1440, 6, 1],
    ]);
    expect(await read("cdn_organization_traffic_minutes")).toEqual([
      [day + 61, 8, 2],
      [day + 1439, 4, 1],
      [day + 1440, 6, 1],
    ]);
    expect(await read("cdn_organization_traffic_hours")).toEqual([
      [day, 2, 1],
      [day + 60, 8, 2],
      [day + 1380, 4, 1],
      [day + 1440, 6, 1],
    ]);
    expect(await read("cdn_organization_traffic_days")).toEqual([
      [day, 14, 4],
      [day + 1440, 6, 1],
    ]);
  });
  it("fills the five-minute rollups from the minute rows stored before it", async () => {
    const { db } = store;
    await migrateBefore(FIVE_MINUTES);
    const organizationId = await insertOrganization();
    const [first, second] = [randomUUID(), randomUUID()];
    const start = 20_000 * 1440; // a UTC midnight, in minutes since the epoch
    // Minutes on both sides of five-minute boundaries, two distributions sharing some periods.
    const minutes = [
      { distribution_id: first, minute: start, ...counters(1) },
      { distribution_id: first, minute: start + 4, ...counters(2) },
      { distribution_id: first, minute: start + 5, ...counters(3) },
      { distribution_id: second, minute: start + 3, ...counters(4) },
      { distribution_id: second, minute: start + 1439, ...counters(5) },
    ].map((row) => ({ ...row, organization_id: organizationId }));
    await db.insertInto("cdn_traffic_minutes").values(minutes).execute();
    // As the flush wrote the organization's minutes: the sums over its distributions.
    await db
      .insertInto("cdn_organization_traffic_minutes")
      .values([
        { organization_id: organizationId, minute: start, ...counters(1) },
        { organization_id: organizationId, minute: start + 3, ...counters(4) },
        { organization_id: organizationId, minute: start + 4, ...counters(2) },
        { organization_id: organizationId, minute: start + 5, ...counters(3) },
        { organization_id: organizationId, minute: start + 1439, ...counters(5) },
      ])
      .execute();

    await store.migrate();

    const read = async (table: "cdn_traffic_five_minutes" | "cdn_organization_traffic_five_minutes") =>
      (await db.selectFrom(table).selectAll().orderBy("minute").orderBy("requests").execute()).map((row) => ({
        ...row,
        minute: Number(row.minute),
      }));
    // counters(n) is linear in n except origin_fetches (1 per minute row), so a sum of minutes is
    // counters(sum of n) with origin_fetches the number of minutes summed.
    const summed = (requests: number, minuteRows: number) => ({
      ...counters(requests),
      origin_fetches: minuteRows,
    });
    expect(await read("cdn_traffic_five_minutes")).toEqual([
      { distribution_id: first, organization_id: organizationId, minute: start, ...summed(3, 2) },
      { distribution_id: second, organization_id: organizationId, minute: start, ...summed(4, 1) },
      { distribution_id: first, organization_id: organizationId, minute: start + 5, ...summed(3, 1) },
      { distribution_id: second, organization_id: organizationId, minute: start + 1435, ...summed(5, 1) },
    ]);
    expect(await read("cdn_organization_traffic_five_minutes")).toEqual([
      { organization_id: organizationId, minute: start, ...summed(7, 3) },
      { organization_id: organizationId, minute: start + 5, ...summed(3, 1) },
      { organization_id: organizationId, minute: start + 1435, ...summed(5, 1) },
    ]);
  });
});
