import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JobStatus } from "../../src/jobs/tables.ts";
import type { Housekeeper } from "../../src/ops/housekeeping.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

const DAY_MS = 24 * 60 * 60 * 1000;
const daysAgo = (days: number) => new Date(Date.now() - days * DAY_MS);

describe("housekeeping", () => {
  let t: TestApp;
  let housekeeper: Housekeeper;
  beforeAll(async () => {
    // A worker whose hourly round is far off: the test runs the round itself.
    t = await startTestApp({
      CUMULO_ROLES: "api,worker",
      CUMULO_JOB_RETENTION_DAYS: "7",
      CUMULO_CDN_MINUTE_RETENTION_DAYS: "35",
    });
    housekeeper = t.cumulo.services.workers.find((worker) => worker.name === "housekeeping") as Housekeeper;
  });
  afterAll(() => t.close());

  it("deletes finished jobs and CDN minute and five-minute rollups past their retention, and nothing else", async () => {
    const { db } = t.cumulo.store;
    const job = (status: JobStatus, age: number) => {
      const stamp = daysAgo(age).toISOString();
      return {
        id: randomUUID(),
        kind: "housekeeping-test",
        payload: "{}",
        status,
        run_at: stamp,
        attempts: 1,
        max_attempts: 1,
        locked_until: null,
        last_error: null,
        created_at: stamp,
        updated_at: stamp,
      };
    };
    const jobs = {
      oldDone: job("done", 8),
      recentDone: job("done", 6),
      oldFailed: job("failed", 30),
      oldPending: job("pending", 30),
    };
    await db.insertInto("jobs").values(Object.values(jobs)).execute();

    const { organizationId } = await t.createOrganization("traffic owner");
    const distributionId = randomUUID();
    const minuteOf = (date: Date) => Math.floor(date.getTime() / 60_000);
    const counters = {
      requests: 1,
      sent_bytes: 10,
      upstream_bytes: 10,
      origin_time_ms: 5,
      origin_fetches: 1,
      responses_2xx: 1,
      responses_3xx: 0,
      responses_4xx: 0,
      responses_5xx: 0,
    };
    const old = minuteOf(daysAgo(40));
    const recent = minuteOf(daysAgo(30));
    const row = (minute: number) => ({
      distribution_id: distributionId,
      organization_id: organizationId,
      minute,
      ...counters,
    });
    await db
      .insertInto("cdn_traffic_minutes")
      .values([row(old), row(old + 1), row(recent)])
      .execute();
    await db
      .insertInto("cdn_traffic_hours")
      .values([row(Math.floor(old / 60) * 60)])
      .execute();
    const fiveMinutesOf = (minute: number) => minute - (minute % 5);
    await db
      .insertInto("cdn_traffic_five_minutes")
      .values([row(fiveMinutesOf(old)), row(fiveMinutesOf(recent))])
      .execute();

    await housekeeper.runOnce();

    const left = await db.selectFrom("jobs").select("id").where("kind", "=", "housekeeping-test").execute();
    expect(left.map((entry) => entry.id).sort()).toEqual(
      [jobs.recentDone.id, jobs.oldFailed.id, jobs.oldPending.id].sort(),
    );
    const minutes = await db
      .selectFrom("cdn_traffic_minutes")
      .select("minute")
      .where("distribution_id", "=", distributionId)
      .execute();
    expect(minutes.map((entry) => Number(entry.minute))).toEqual([recent]);
    const fiveMinutes = await db
      .selectFrom("cdn_traffic_five_minutes")
      .select("minute")
      .where("distribution_id", "=", distributionId)
      .execute();
    expect(fiveMinutes.map((entry) => Number(entry.minute))).toEqual([fiveMinutesOf(recent)]);
    const hours = await db
      .selectFrom("cdn_traffic_hours")
      .select("minute")
      .where("distribution_id", "=", distributionId)
      .execute();
    expect(hours).toHaveLength(1);
  });
});
