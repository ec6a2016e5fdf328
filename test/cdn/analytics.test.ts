import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TrafficRepository } from "../../src/cdn/repository.ts";
import { METRICS } from "../../src/cdn/schemas.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
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
const sum = (data: Row[], metric: string) => data.reduce((total, row) => total + Number(row[metric]), 0);

describe("CDN analytics", () => {
  let t: TestApp;
  let origin: Origin;
  let edge: string;
  let hostA: string;
  let hostB: string;
  let other: { organizationId: string; key: string };
  let otherHost: string;
  let distributionA: { id: string };
  // Frozen in the middle of a minute: every request of a test falls in one time bucket.
  const clock = new TestClock(new Date("2026-03-02T12:30:30.000Z"));

  beforeAll(async () => {
    t = await startTestApp({ ...EDGE_ENV, CUMULO_EDGE_ANALYTICS_FLUSH_MS: "60000" }, { clock });
    edge = edgeUrlOf(t);
    origin = await startOrigin();
    origin.route("/object.bin", (_req, res) =>
      res.writeHead(200, { "cache-control": "max-age=600", etag: '"e1"' }).end(Buffer.alloc(1000, 3)),
    );
    hostA = uniqueHost("stats-a");
    hostB = uniqueHost("stats-b");
    distributionA = await createDistribution(t, { hostname: hostA, origin_url: origin.url });
    await createDistribution(t, { hostname: hostB, origin_url: origin.url });
    other = await t.createOrganization("analytics other");
    otherHost = uniqueHost("stats-other");
    await createDistribution(t, { hostname: otherHost, origin_url: origin.url }, other.key);
  });
  afterAll(async () => {
    await t.close();
    await origin.close();
  });

  it("counts every response the edge sends, per distribution", async () => {
    const a = (path: string, options: { method?: string; headers?: Record<string, string> } = {}) =>
      edgeRequest(edge, `/${hostA}${path}`, options);
    const responses = [
      await a("/object.bin"), // MISS: 1000 bytes from origin
      await a("/object.bin"), // HIT
      await a("/object.bin", { method: "HEAD" }),
      await a("/object.bin", { headers: { range: "bytes=0-9" } }),
      await a("/object.bin", { headers: { "if-none-match": '"e1"' } }),
      await a("/missing"), // origin 404, relayed
      await a("/object.bin", { method: "DELETE" }),
    ];
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 206, 304, 404, 405]);
    const sent = responses.reduce((total, r) => total + r.body.length, 0);
    await edgeRequest(edge, `/${hostB}/object.bin`);
    await edgeRequest(edge, `/${otherHost}/object.bin`);
    await t.cumulo.services.cdnTraffic.flush();

    const from = new Date(clock.now().getTime() - 5 * 60_000).toISOString();
    const result = await t.request(
      "GET",
      `/v1/cdn/analytics?from=${from}&granularity=1m&distribution=${hostA}`,
      {
        anonymous: true,
        headers: { "x-api-key": t.adminKey },
      },
    );
    expect(result.status).toBe(200);
    expect(result.body).toMatchObject({
      From: from,
      Granularity: "1m",
      Distribution: hostA,
      Metrics: [
        "requests",
        "traffic",
        "cache_hit_traffic_ratio",
        "upstream_origin_time_ms",
        "responses_2xx",
        "responses_3xx",
        "responses_4xx",
        "responses_5xx",
      ],
    });
    const data = result.body.Data;
    expect(sum(data, "requests")).toBe(7);
    expect(sum(data, "traffic")).toBe(sent);
    expect(sum(data, "responses_2xx")).toBe(4);
    expect(sum(data, "responses_3xx")).toBe(1);
    expect(sum(data, "responses_4xx")).toBe(2);
    expect(sum(data, "responses_5xx")).toBe(0);
    const busy = data.filter((row: Row) => Number(row.requests) > 0);
    const upstream = 1000 + "no such object".length;
    expect(busy).toHaveLength(1);
    expect(busy[0].cache_hit_traffic_ratio).toBeCloseTo(1 - upstream / sent, 10);
    expect(busy[0].upstream_origin_time_ms).toBeGreaterThan(0);
    for (const row of data) {
      if (Number(row.requests) === 0) expect(row.cache_hit_traffic_ratio).toBe(0);
    }

    const all = await t.request("GET", `/v1/cdn/analytics?from=${from}&granularity=5m&metrics=requests`);
    expect(all.body.Distribution).toBe("*");
    expect(all.body.Metrics).toEqual(["requests"]);
    expect(Object.keys(all.body.Data[0]).sort()).toEqual(["Timestamp", "requests"]);
    expect(sum(all.body.Data, "requests")).toBe(8);
    const emptyFilter = await t.request(
      "GET",
      `/v1/cdn/analytics?from=${from}&metrics=requests&distribution=`,
    );
    expect(emptyFilter.body.Distribution).toBe("*");

    const slowHost = uniqueHost("stats-slow");
    await createDistribution(t, { hostname: slowHost, origin_url: origin.url });
    origin.route("/slow.bin", async (_req, res) => {
      await new Promise((resolve) => setTimeout(resolve, 150));
      res.writeHead(200, { "cache-control": "max-age=600" }).end("slow");
    });
    expect((await edgeRequest(edge, `/${slowHost}/slow.bin`)).status).toBe(200);
    expect((await edgeRequest(edge, `/${slowHost}/slow.bin`)).headers["x-cache"]).toBe("HIT");
    await t.cumulo.services.cdnTraffic.flush();
    const slow = await t.request(
      "GET",
      `/v1/cdn/analytics?from=${from}&granularity=1h&distribution=${slowHost}&metrics=upstream_origin_time_ms,requests,cache_hit_traffic_ratio`,
    );
    expect(sum(slow.body.Data, "requests")).toBe(2);
    const slowRows = slow.body.Data.filter((row: Row) => Number(row.requests) > 0);
    expect(slowRows).toHaveLength(1);
    // one origin fetch that took at least the origin's 150 ms wait; the hit does not count in the mean
    expect(slowRows[0].upstream_origin_time_ms).toBeGreaterThanOrEqual(145);
    expect(slowRows[0].cache_hit_traffic_ratio).toBe(0.5);

    const theirs = await t.request("GET", `/v1/cdn/analytics?from=${from}&metrics=requests`, {
      key: other.key,
    });
    expect(sum(theirs.body.Data, "requests")).toBe(1);
    const notTheirs = await t.request("GET", `/v1/cdn/analytics?distribution=${hostA}`, { key: other.key });
    expect(notTheirs.status).toBe(404);
  });

  it("aligns buckets to the granularity in UTC and fills empty ones with zeros", async () => {
    const traffic = new TrafficRepository(t.cumulo.store.db, t.cumulo.store.dialect);
    const organizationId = (await t.cumulo.services.cdn.distributionForHost(hostA))?.organization_id ?? "";
    const minute = (iso: string) => Date.parse(iso) / 60_000;
    const row = (iso: string, requests: number, sent: number, upstream: number) => ({
      distribution_id: distributionA.id,
      organization_id: organizationId,
      minute: minute(iso),
      requests,
      sent_bytes: sent,
      upstream_bytes: upstream,
      origin_time_ms: 30,
      origin_fetches: 1,
      responses_2xx: requests,
      responses_3xx: 0,
      responses_4xx: 0,
      responses_5xx: 0,
    });
    await traffic.add([row("2026-01-01T10:07:00Z", 5, 1000, 250), row("2026-01-01T10:20:00Z", 3, 500, 0)]);
    await traffic.add([row("2026-01-01T10:07:00Z", 1, 0, 0)]); // adds to the same minute

    const result = await t.request(
      "GET",
      `/v1/cdn/analytics?from=2026-01-01T10:07:30Z&to=2026-01-01T11:00:00Z&granularity=15m&distribution=${hostA}&metrics=requests,traffic&metrics=cache_hit_traffic_ratio&metrics=upstream_origin_time_ms`,
    );
    expect(result.status).toBe(200);
    expect(result.body).toEqual({
      From: "2026-01-01T10:07:30.000Z",
      To: "2026-01-01T11:00:00.000Z",
      Metrics: ["requests", "traffic", "cache_hit_traffic_ratio", "upstream_origin_time_ms"],
      Granularity: "15m",
      Distribution: hostA,
      Data: [
        {
          Timestamp: "2026-01-01T10:00:00.000Z",
          requests: 6,
          traffic: 1000,
          cache_hit_traffic_ratio: 0.75,
          upstream_origin_time_ms: 30,
        },
        {
          Timestamp: "2026-01-01T10:15:00.000Z",
          requests: 3,
          traffic: 500,
          cache_hit_traffic_ratio: 1,
          upstream_origin_time_ms: 30,
        },
        {
          Timestamp: "2026-01-01T10:30:00.000Z",
          requests: 0,
          traffic: 0,
          cache_hit_traffic_ratio: 0,
          upstream_origin_time_ms: 0,
        },
        {
          Timestamp: "2026-01-01T10:45:00.000Z",
          requests: 0,
          traffic: 0,
          cache_hit_traffic_ratio: 0,
          upstream_origin_time_ms: 0,
        },
      ],
    });

    // A list as axios, jQuery and qs send it.
    const bracketed = await t.request(
      "GET",
      `/v1/cdn/analytics?from=2026-01-01T10:07:30Z&to=2026-01-01T11:00:00Z&granularity=15m&distribution=${hostA}&metrics[]=requests&metrics%5B%5D=traffic`,
    );
    expect(bracketed.body.Metrics).toEqual(["requests", "traffic"]);
    expect(bracketed.body.Data[0]).toEqual({
      Timestamp: "2026-01-01T10:00:00.000Z",
      requests: 6,
      traffic: 1000,
    });

    const daily = await t.request(
      "GET",
      "/v1/cdn/analytics?from=2025-12-31T18:00:00%2B02:00&to=2026-01-02T00:00:00Z&granularity=1d&metrics=requests",
    );
    expect(daily.body.Data).toEqual([
      { Timestamp: "2025-12-31T00:00:00.000Z", requests: 0 },
      { Timestamp: "2026-01-01T00:00:00.000Z", requests: 9 },
    ]);

    const unencodedPlus = await t.request(
      "GET",
      "/v1/cdn/analytics?from=2026-01-01T12:00:00+02:00&to=2026-01-01T11:00:00Z&granularity=15m&metrics=requests",
    );
    expect(unencodedPlus.status).toBe(200);
    expect(unencodedPlus.body.From).toBe("2026-01-01T10:00:00.000Z");
    expect(unencodedPlus.body.Data.map((row: Row) => row.requests)).toEqual([6, 3, 0, 0]);

    // ISO 8601 offsets of whole hours, "+" encoded or not.
    for (const offset of ["%2B02", "+02"]) {
      const hoursOnly = await t.request(
        "GET",
        `/v1/cdn/analytics?from=2026-01-01T12:00:00${offset}&to=2026-01-01T06:00:00-05&granularity=15m&metrics=requests`,
      );
      expect(hoursOnly.status).toBe(200);
      expect([hoursOnly.body.From, hoursOnly.body.To]).toEqual([
        "2026-01-01T10:00:00.000Z",
        "2026-01-01T11:00:00.000Z",
      ]);
    }

    const defaults = await t.request("GET", "/v1/cdn/analytics?metrics=requests");
    expect(defaults.body.Granularity).toBe("1h");
    expect(Date.parse(defaults.body.To) - Date.parse(defaults.body.From)).toBe(24 * 3600_000);
    expect(defaults.body.Data.length).toBeGreaterThanOrEqual(24);
    expect(defaults.body.Data.length).toBeLessThanOrEqual(25);
  });

  it("rejects bad parameters with the contract's codes, all at once", async () => {
    const errorsOf = async (query: string) => {
      const response = await t.request("GET", `/v1/cdn/analytics?${query}`);
      expect(response.status, query).toBe(400);
      return response.body.errors.map((e: { field: string; code: string }) => `${e.field}:${e.code}`);
    };
    expect(await errorsOf("metrics=requests,bogus")).toEqual(["metrics:validation_enum"]);
    expect(await errorsOf("granularity=2h")).toEqual(["granularity:validation_enum"]);
    expect(await errorsOf("from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z")).toEqual([
      "to:validation_min",
    ]);
    expect(await errorsOf("from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:00Z")).toEqual([
      "to:validation_min",
    ]);
    // Half a millisecond after `from` is after it (Date.parse alone dropped the half).
    const finer = await t.request(
      "GET",
      "/v1/cdn/analytics?from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:00.0005Z",
    );
    expect(finer.status).toBe(200);
    // A `from` between two milliseconds is the earlier one: the range is valid, the bucket holding
    // `from` comes first, and `From` echoes it to the millisecond (it was taken as the later one).
    const fromFiner = await t.request(
      "GET",
      "/v1/cdn/analytics?from=2026-01-01T00:00:59.9999Z&to=2026-01-01T00:01:00Z&granularity=1m&metrics=requests",
    );
    expect(fromFiner.status).toBe(200);
    expect(fromFiner.body.From).toBe("2026-01-01T00:00:59.999Z");
    expect(fromFiner.body.Data.map((row: Row) => row.Timestamp)).toEqual(["2026-01-01T00:00:00.000Z"]);
    const lastDay = await t.request(
      "GET",
      "/v1/cdn/analytics?from=2026-01-01T23:59:59.9999Z&to=2026-01-02T00:00:00.5Z&granularity=1d&metrics=requests",
    );
    expect(lastDay.body.Data.map((row: Row) => row.Timestamp)).toEqual([
      "2026-01-01T00:00:00.000Z",
      "2026-01-02T00:00:00.000Z",
    ]);
    expect(await errorsOf("from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z&granularity=1m")).toEqual([
      "granularity:validation_max",
    ]);
    expect(await errorsOf("from=yesterday&to=2026-13-45T00:00:00Z&metrics=nope&granularity=1w")).toEqual([
      "metrics:validation_enum",
      "granularity:validation_enum",
      "to:validation_format",
      "from:validation_format",
    ]);
    // A repeated parameter is the wrong type; the others are still reported with it.
    expect(await errorsOf("metrics=foo&from=bad&granularity=1m&granularity=1h")).toEqual([
      "granularity:validation_type",
      "metrics:validation_enum",
      "from:validation_format",
    ]);
    // days past the end of their month are not rolled over into the next one
    expect(await errorsOf("from=2026-02-30T00:00:00Z&to=2026-04-31")).toEqual([
      "to:validation_format",
      "from:validation_format",
    ]);
    // The messages say what was refused and what is taken, in the words a media time filter uses.
    const worded = await t.request(
      "GET",
      "/v1/cdn/analytics?metrics=requests,bogus&from=yesterday&to=2026-01-01T00:00:00Z",
    );
    expect(worded.body.errors).toEqual([
      {
        field: "metrics",
        code: "validation_enum",
        message: `The metrics field must be one of: ${METRICS.join(", ")}; bogus is not.`,
      },
      {
        field: "from",
        code: "validation_format",
        message:
          "The from field has an invalid format. It must be an ISO 8601 timestamp such as 2026-11-21T08:30:00Z, or a date such as 2026-11-21.",
      },
    ]);
    const library = await t.request("GET", "/v1/media/libraries?created_after=yesterday");
    expect(library.body.errors[0].message).toBe(
      worded.body.errors[1].message.replace("from", "created_after"),
    );
    const tooFine = await t.request(
      "GET",
      "/v1/cdn/analytics?from=2020-01-01T00:00:00Z&to=2020-01-08T00:00:00Z&granularity=1m",
    );
    expect(tooFine.body.errors).toEqual([
      {
        field: "granularity",
        code: "validation_max",
        message:
          "The granularity field is too fine for this range: it gives 10080 buckets, at most 10000 are allowed.",
      },
    ]);
    const leapDay = await t.request("GET", "/v1/cdn/analytics?from=2028-02-29T00:00:00Z&to=2028-03-01");
    expect(leapDay.status).toBe(200);
    expect(leapDay.body.From).toBe("2028-02-29T00:00:00.000Z");
    const anonymous = await t.request("GET", "/v1/cdn/analytics", { anonymous: true });
    expect(anonymous.status).toBe(401);
  });
});
