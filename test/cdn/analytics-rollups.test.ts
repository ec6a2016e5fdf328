import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TRAFFIC_COUNTERS, TrafficRepository } from "../../src/cdn/repository.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";
import {
  createDistribution,
  EDGE_ENV,
  edgeRequest,
  edgeUrlOf,
  type Origin,
  startOrigin,
  TestClock,
  uniqueHost,
} from "./support.ts";

type Row = Record<string, number | string>;
const COUNTERS = [
  "requests",
  "sent_bytes",
  "upstream_bytes",
  "origin_time_ms",
  "origin_fetches",
  "responses_2xx",
  "responses_3xx",
  "responses_4xx",
  "responses_5xx",
] as const;
type Sums = Record<(typeof COUNTERS)[number], number>;
const GRANULARITY_MINUTES = { "1m": 1, "5m": 5, "15m": 15, "1h": 60, "6h": 360, "1d": 1440 };

/** What CONTRACT 7 says a bucket shows, computed here straight from summed minute rows. */
function expectedBucket(timestamp: string, sums: Sums): Row {
  return {
    Timestamp: timestamp,
    requests: sums.requests,
    traffic: sums.sent_bytes,
    cache_hit_traffic_ratio:
      sums.sent_bytes > 0 ? Math.min(1, Math.max(0, 1 - sums.upstream_bytes / sums.sent_bytes)) : 0,
    upstream_origin_time_ms: sums.origin_fetches > 0 ? sums.origin_time_ms / sums.origin_fetches : 0,
    responses_2xx: sums.responses_2xx,
    responses_3xx: sums.responses_3xx,
    responses_4xx: sums.responses_4xx,
    responses_5xx: sums.responses_5xx,
  };
}

describe("CDN analytics rollups", () => {
  let t: TestApp;
  let origin: Origin;
  let edge: string;
  let org: { organizationId: string; key: string };
  let hostA: string;
  let hostB: string;
  let otherHost: string;
  let releaseRevalidation: () => void = () => undefined;
  // Two minutes before a day (and month and hour) boundary, frozen: the test moves it.
  const clock = new TestClock(new Date("2026-05-31T23:58:30.000Z"));

  beforeAll(async () => {
    t = await startTestApp({ ...EDGE_ENV, CUMULO_EDGE_ANALYTICS_FLUSH_MS: "600000" }, { clock });
    edge = edgeUrlOf(t);
    origin = await startOrigin();
    // Cached for 30 s of the test clock, so later steps fetch it again.
    origin.route("/short.bin", (_req, res) =>
      res.writeHead(200, { "cache-control": "max-age=30", etag: '"s1"' }).end(Buffer.alloc(700, 1)),
    );
    // Never stored, and slow: origin times differ per fetch, so a mean of means would be wrong.
    origin.route("/slow.txt", async (_req, res) => {
      await new Promise((resolve) => setTimeout(resolve, 40));
      res.writeHead(200, { "cache-control": "no-store" }).end("slow answer");
    });
    // Stale after a second, then served while revalidated in the background (RFC 5861); that
    // revalidation's answer waits for `releaseRevalidation` (20 s at most).
    const revalidationHeld = new Promise<void>((resolve) => {
      releaseRevalidation = resolve;
      setTimeout(resolve, 20_000).unref();
    });
    let swrServed = 0;
    origin.route("/swr.bin", async (_req, res) => {
      const first = ++swrServed === 1;
      if (!first) await revalidationHeld;
      res
        .writeHead(200, { "cache-control": "max-age=1, stale-while-revalidate=86400" })
        .end(Buffer.alloc(first ? 300 : 500, 2));
    });
    org = await t.createOrganization("rollups");
    hostA = uniqueHost("rollup-a");
    hostB = uniqueHost("rollup-b");
    await createDistribution(t, { hostname: hostA, origin_url: origin.url }, org.key);
    await createDistribution(t, { hostname: hostB, origin_url: origin.url }, org.key);
    otherHost = uniqueHost("rollup-other");
    await createDistribution(t, { hostname: otherHost, origin_url: origin.url });
  });
  afterAll(async () => {
    await t.close();
    await origin.close();
  });

  it("answers every granularity with exactly the sums of the minute data, across hour and day boundaries", async () => {
    const traffic = async (host: string, round: number) => {
      await edgeRequest(edge, `/${host}/short.bin`);
      await edgeRequest(edge, `/${host}/short.bin`, { headers: { range: "bytes=0-99" } });
      await edgeRequest(edge, `/${host}/short.bin`, { headers: { "if-none-match": '"s1"' } });
      if (round % 2 === 0) await edgeRequest(edge, `/${host}/slow.txt`);
      if (round % 3 === 0) await edgeRequest(edge, `/${host}/missing`);
      if (round === 0 && host === hostA) await edgeRequest(edge, `/${host}/swr.bin`);
    };
    // Steps of the test clock: within a minute, across minutes, the hour, the day, and a later hour.
    const steps = [0, 20_000, 45_000, 50_000, 35_000, 3_600_000, 1_500_000, 4 * 3_600_000, 61_000];
    for (const [round, step] of steps.entries()) {
      clock.advance(step);
      await traffic(hostA, round);
      if (round % 2 === 1) await traffic(hostB, round);
      await traffic(otherHost, round);
      // Flushes at some steps only: a flush may add to rows an earlier flush made.
      if (round % 3 !== 0) await t.cumulo.services.cdnTraffic.flush();
    }
    const db = t.cumulo.store.db;
    // A stale copy's hit whose background revalidation the origin answers in the next minute: that
    // minute has origin bytes and time and no request, and rolls up like any other.
    expect((await edgeRequest(edge, `/${hostA}/swr.bin`)).headers["x-cache"]).toBe("HIT");
    await waitUntil(() => origin.hitsOf("/swr.bin") === 2);
    clock.advance(60_000);
    releaseRevalidation();
    const revalidationMinute = Math.floor(clock.now().getTime() / 60_000);
    await waitUntil(
      async () => {
        await t.cumulo.services.cdnTraffic.flush();
        return db
          .selectFrom("cdn_traffic_minutes")
          .select("minute")
          .where("organization_id", "=", org.organizationId)
          .where("minute", "=", revalidationMinute)
          .executeTakeFirst();
      },
      30_000,
      "the background revalidation's minute row",
    );
    await t.cumulo.services.cdnTraffic.flush();

    const minuteRows = await db
      .selectFrom("cdn_traffic_minutes")
      .selectAll()
      .where("organization_id", "=", org.organizationId)
      .execute();
    const daysSeen = new Set(minuteRows.map((row) => Math.floor(Number(row.minute) / 1440)));
    const hoursSeen = new Set(minuteRows.map((row) => Math.floor(Number(row.minute) / 60)));
    expect(daysSeen.size).toBe(2);
    expect(hoursSeen.size).toBeGreaterThanOrEqual(4);
    const revalidationRow = minuteRows.find((row) => Number(row.minute) === revalidationMinute);
    expect(revalidationRow).toMatchObject({ requests: 0, sent_bytes: 0, upstream_bytes: 500 });
    expect(Number(revalidationRow?.origin_fetches)).toBe(1);

    const distributionA = await t.cumulo.services.cdn.distributionForHost(hostA);
    const distributionB = await t.cumulo.services.cdn.distributionForHost(hostB);
    /** The API's answer for a scope, granularity and window equals the sums of the minute rows. */
    const expectSumsOfMinutes = async (
      scope: string,
      distributionId: string | undefined,
      granularity: keyof typeof GRANULARITY_MINUTES,
      from: string,
      to: string,
      onlyRequests = false,
    ) => {
      const minutes = GRANULARITY_MINUTES[granularity];
      const rows = minuteRows.filter((row) => !distributionId || row.distribution_id === distributionId);
      const sumsByBucket = new Map<number, Sums>();
      for (const row of rows) {
        const bucket = Math.floor(Number(row.minute) / minutes);
        const sums = sumsByBucket.get(bucket) ?? (Object.fromEntries(COUNTERS.map((c) => [c, 0])) as Sums);
        for (const column of COUNTERS) sums[column] += Number(row[column]);
        sumsByBucket.set(bucket, sums);
      }
      const expected: Row[] = [];
      for (let at = Date.parse(from); at < Date.parse(to); at += minutes * 60_000) {
        const bucket = at / 60_000 / minutes;
        const sums = sumsByBucket.get(bucket) ?? (Object.fromEntries(COUNTERS.map((c) => [c, 0])) as Sums);
        const bucketRow = expectedBucket(new Date(at).toISOString(), sums);
        expected.push(onlyRequests ? { Timestamp: bucketRow.Timestamp, requests: sums.requests } : bucketRow);
      }
      const distribution = scope === "*" ? "" : `&distribution=${scope}`;
      const metrics = onlyRequests ? "&metrics=requests" : "";
      const answer = await t.request(
        "GET",
        `/v1/cdn/analytics?from=${from}&to=${to}&granularity=${granularity}${distribution}${metrics}`,
        { key: org.key },
      );
      expect(answer.status).toBe(200);
      expect(answer.body.Data, `${scope} ${granularity} ${from}`).toEqual(expected);
    };
    const from = "2026-05-31T00:00:00.000Z";
    const to = "2026-06-02T00:00:00.000Z";
    for (const [scope, distributionId] of [
      [hostA, distributionA?.id],
      ["*", undefined],
    ] as const) {
      for (const granularity of Object.keys(GRANULARITY_MINUTES) as (keyof typeof GRANULARITY_MINUTES)[]) {
        await expectSumsOfMinutes(scope, distributionId, granularity, from, to);
      }
    }
    // The store runs these queries prepared, compiled once per table, granularity and metrics: the
    // same query again with other values (another distribution; a window starting earlier than the
    // one it was compiled for, with traffic before that) answers for them.
    await expectSumsOfMinutes(hostB, distributionB?.id, "1h", from, to);
    await expectSumsOfMinutes("*", undefined, "1h", "2026-06-01T00:00:00.000Z", to, true);
    await expectSumsOfMinutes("*", undefined, "1h", from, to, true);

    // The five-minute tables themselves hold exactly the sums of their minutes, per distribution and
    // per organization (the `5m` answers above are read from them).
    const fiveMinuteSums = (rows: Row[], scopeOf: (row: Row) => string) => {
      const sums = new Map<string, number[]>();
      for (const row of rows) {
        const key = `${scopeOf(row)}|${Math.floor(Number(row.minute) / 5) * 5}`;
        const total = sums.get(key) ?? COUNTERS.map(() => 0);
        sums.set(
          key,
          total.map((value, index) => value + Number(row[COUNTERS[index] as (typeof COUNTERS)[number]])),
        );
      }
      return [...sums.entries()].sort(([a], [b]) => a.localeCompare(b));
    };
    const byDistribution = await db
      .selectFrom("cdn_traffic_five_minutes")
      .selectAll()
      .where("organization_id", "=", org.organizationId)
      .execute();
    expect(fiveMinuteSums(byDistribution, (row) => String(row.distribution_id))).toEqual(
      fiveMinuteSums(minuteRows, (row) => String(row.distribution_id)),
    );
    const byOrganization = await db
      .selectFrom("cdn_organization_traffic_five_minutes")
      .selectAll()
      .where("organization_id", "=", org.organizationId)
      .execute();
    expect(byOrganization.length).toBeGreaterThan(4);
    expect(fiveMinuteSums(byOrganization, (row) => String(row.organization_id))).toEqual(
      fiveMinuteSums(minuteRows, (row) => String(row.organization_id)),
    );

    // The traffic made several origin fetches of different lengths in one day: the daily mean is
    // their total over their count.
    const daily = await t.request(
      "GET",
      `/v1/cdn/analytics?from=2026-06-01T00:00:00Z&to=2026-06-02T00:00:00Z&granularity=1d&distribution=${hostA}`,
      { key: org.key },
    );
    const dayRows = minuteRows.filter(
      (row) =>
        row.distribution_id === distributionA?.id && Number(row.minute) >= Date.parse("2026-06-01") / 60_000,
    );
    const fetches = dayRows.reduce((total, row) => total + Number(row.origin_fetches), 0);
    const originMs = dayRows.reduce((total, row) => total + Number(row.origin_time_ms), 0);
    expect(fetches).toBeGreaterThan(2);
    expect(daily.body.Data[0].upstream_origin_time_ms).toBe(originMs / fetches);
    expect(daily.body.Data[0].requests).toBe(dayRows.reduce((total, row) => total + Number(row.requests), 0));

    // Retention deletes the minute and five-minute rollups (of distributions and organizations) before
    // a time; the hourly and daily ones, and so the answers at those granularities, stay.
    const hourly = `/v1/cdn/analytics?from=${from}&to=${to}&granularity=1h`;
    const hourlyBefore = (await t.request("GET", hourly, { key: org.key })).body.Data;
    await new TrafficRepository(db, t.cumulo.store.dialect).pruneMinutesBefore(
      Date.parse("2026-06-01T00:00:00Z") / 60_000,
    );
    const minutesLeft = await db
      .selectFrom("cdn_organization_traffic_minutes")
      .select("minute")
      .where("organization_id", "=", org.organizationId)
      .execute();
    expect(minutesLeft.length).toBeGreaterThan(0);
    for (const row of minutesLeft)
      expect(Number(row.minute)).toBeGreaterThanOrEqual(Date.parse("2026-06-01") / 60_000);
    const fiveMinutesLeft = await db
      .selectFrom("cdn_organization_traffic_five_minutes")
      .select("minute")
      .where("organization_id", "=", org.organizationId)
      .execute();
    expect(fiveMinutesLeft.length).toBeGreaterThan(0);
    expect(fiveMinutesLeft.length).toBeLessThan(byOrganization.length);
    for (const row of fiveMinutesLeft)
      expect(Number(row.minute)).toBeGreaterThanOrEqual(Date.parse("2026-06-01") / 60_000);
    expect((await t.request("GET", hourly, { key: org.key })).body.Data).toEqual(hourlyBefore);
  });

  it("lets the process answer between retention's statements", async () => {
    const { db, dialect } = t.cumulo.store;
    const firstMinute = Date.parse("2026-05-20T00:00:00Z") / 60_000;
    const zeros = Object.fromEntries(TRAFFIC_COUNTERS.map((counter) => [counter, 0]));
    // Five hours of one distribution's minutes, long before anything else.
    await db
      .insertInto("cdn_traffic_minutes")
      .values(
        [0, 60, 120, 180, 240].map((offset) => ({
          distribution_id: "00000000-0000-4000-8000-00000000a11c",
          organization_id: org.organizationId,
          minute: firstMinute + offset,
          ...zeros,
        })) as never,
      )
      .execute();
    let turns = 0;
    let pruning = true;
    const turn = () => {
      turns += 1;
      if (pruning) setImmediate(turn);
    };
    setImmediate(turn);
    await new TrafficRepository(db, dialect).pruneMinutesBefore(firstMinute + 24 * 60);
    pruning = false;
    // SQLite's statements run inside the process: without a pause between them, nothing else ran.
    expect(turns).toBeGreaterThanOrEqual(5);
    const left = await db
      .selectFrom("cdn_traffic_minutes")
      .select("minute")
      .where("minute", "<", firstMinute + 24 * 60)
      .execute();
    expect(left).toEqual([]);
  });
});
