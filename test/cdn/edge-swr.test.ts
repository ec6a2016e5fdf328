import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { sampleValue, scrapeMetrics } from "../support/metrics.ts";
import { waitUntil } from "../support/wait.ts";
import {
  createDistribution,
  EDGE_ENV,
  type EdgeResponse,
  edgeRequest,
  edgeUrlOf,
  type Origin,
  startOrigin,
  TestClock,
  uniqueHost,
} from "./support.ts";

const METRICS_TOKEN = "swr-metrics-token-0123456789abcdef";

/** Far longer than a hit takes, so an origin that held on this long shows a viewer waited on it. */
const HOLD_AT_MOST_MS = 20_000;

/**
 * An origin path answering `v1`, `v2`, ... by request; the requests `held` names wait until
 * `release()` (or `HOLD_AT_MOST_MS`, so a viewer the edge made wait still gets an answer).
 */
function versioned(
  origin: Origin,
  path: string,
  headers: Record<string, string>,
  held: (n: number) => boolean = () => false,
) {
  let served = 0;
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => {
    release = resolve;
    setTimeout(resolve, HOLD_AT_MOST_MS).unref();
  });
  const state = { answered: 0, release };
  origin.route(`/root${path}`, async (_req: IncomingMessage, res: ServerResponse) => {
    const n = ++served;
    if (held(n)) await released;
    state.answered++;
    res.writeHead(200, headers).end(`v${n}`);
  });
  return state;
}

/**
 * An origin path varying by `Accept-Language` (`max-age=1, stale-while-revalidate=60`), answering
 * `{language} v1`, `v2`, ... by language; English requests after the first wait until `releaseEnglish()`
 * (or `HOLD_AT_MOST_MS`).
 */
function perLanguage(origin: Origin, path: string) {
  const served = new Map<string, number>();
  let releaseEnglish: () => void = () => undefined;
  const englishReleased = new Promise<void>((resolve) => {
    releaseEnglish = resolve;
    setTimeout(resolve, HOLD_AT_MOST_MS).unref();
  });
  origin.route(`/root${path}`, async (req: IncomingMessage, res: ServerResponse) => {
    const language = String(req.headers["accept-language"]);
    const n = (served.get(language) ?? 0) + 1;
    served.set(language, n);
    if (language === "en" && n > 1) await englishReleased;
    res
      .writeHead(200, { vary: "Accept-Language", "cache-control": "max-age=1, stale-while-revalidate=60" })
      .end(`${language} v${n}`);
  });
  return { served, releaseEnglish };
}

const seen = (answer: EdgeResponse) => [answer.status, answer.text, answer.headers["x-cache"]];

/**
 * `path` answered once as `v1` (a MISS), then made stale within a 60 s `stale-while-revalidate`
 * window; the origin's later answers wait as `held` says.
 */
async function cachedThenStale(
  origin: Origin,
  clock: TestClock,
  get: () => Promise<EdgeResponse>,
  path: string,
  held: (n: number) => boolean = (n) => n > 1,
) {
  const state = versioned(origin, path, { "cache-control": "max-age=1, stale-while-revalidate=60" }, held);
  expect(seen(await get())).toEqual([200, "v1", "MISS"]);
  clock.advance(1500);
  return state;
}

describe("CDN edge: stale-while-revalidate (RFC 5861)", () => {
  let t: TestApp;
  let origin: Origin;
  let edge: string;
  let host: string;
  let distributionId: string;
  // Frozen: Age and freshness move only when a test says so.
  const clock = new TestClock(new Date("2026-12-01T10:00:00.000Z"));
  const get = (path: string, headers: Record<string, string> = {}) =>
    edgeRequest(edge, `/${host}${path}`, { headers });
  /** Asks until the answer has `text` (a background revalidation stored it). */
  const getUntil = (path: string, text: string) =>
    waitUntil(
      async () => {
        const answer = await get(path);
        return answer.text === text ? answer : undefined;
      },
      30_000,
      `${path} answering ${text}`,
    );

  beforeAll(async () => {
    t = await startTestApp(
      { ...EDGE_ENV, CUMULO_EDGE_ORIGIN_TIMEOUT_MS: "30000", CUMULO_METRICS_TOKEN: METRICS_TOKEN },
      { clock },
    );
    edge = edgeUrlOf(t);
    origin = await startOrigin();
    host = uniqueHost("swr");
    distributionId = (await createDistribution(t, { hostname: host, origin_url: `${origin.url}/root` })).id;
  });
  afterAll(async () => {
    await t.close();
    await origin.close();
  });

  it("answers a stale copy within the window at once, and the next viewers get what the background revalidation stored", async () => {
    const path = "/swr.txt";
    const held = await cachedThenStale(origin, clock, () => get(path), path);

    const stale = await get(path);
    expect([...seen(stale), stale.headers.age]).toEqual([200, "v1", "HIT", "1"]);
    // The origin still holds the revalidation: the viewer did not wait on it.
    await waitUntil(() => origin.hitsOf(`/root${path}`) === 2);
    expect(held.answered).toBe(1);

    held.release();
    const renewed = await getUntil(path, "v2");
    expect([...seen(renewed), renewed.headers.age]).toEqual([200, "v2", "HIT", "0"]);
    expect(origin.hitsOf(`/root${path}`)).toBe(2);
  });

  it("revalidates each variant of a path (Vary) on its own, each with its own origin request and answer", async () => {
    const path = "/varied.txt";
    const { served, releaseEnglish } = perLanguage(origin, path);
    const inLanguage = (language: string) => () => get(path, { "accept-language": language });
    const english = inLanguage("en");
    const french = inLanguage("fr");
    /** Asks until the answer is `text`, for less time than the origin holds English at most. */
    const until = (ask: () => Promise<EdgeResponse>, text: string) =>
      waitUntil(
        async () => {
          const answer = await ask();
          return answer.text === text ? answer : undefined;
        },
        HOLD_AT_MOST_MS / 2,
        `${path} answering ${text}`,
      );
    expect(seen(await english())).toEqual([200, "en v1", "MISS"]);
    expect(seen(await french())).toEqual([200, "fr v1", "MISS"]);
    clock.advance(1500); // both variants stale, within the window

    expect(seen(await english())).toEqual([200, "en v1", "HIT"]);
    await waitUntil(() => served.get("en") === 2); // its revalidation, held by the origin
    expect(seen(await french())).toEqual([200, "fr v1", "HIT"]);
    // The French revalidation is not held back by the English one, and stores the French answer.
    const frenchRenewed = await until(french, "fr v2");
    expect([...seen(frenchRenewed), frenchRenewed.headers.age]).toEqual([200, "fr v2", "HIT", "0"]);
    expect(seen(await english())).toEqual([200, "en v1", "HIT"]); // still being revalidated

    releaseEnglish();
    const englishRenewed = await until(english, "en v2");
    expect([...seen(englishRenewed), englishRenewed.headers.age]).toEqual([200, "en v2", "HIT", "0"]);
    expect(Object.fromEntries(served)).toEqual({ en: 2, fr: 2 });
  });

  it("fetches a missing variant of a path (Vary) without waiting on another variant's fetch", async () => {
    const path = "/varied-miss.txt";
    const { served, releaseEnglish } = perLanguage(origin, path);
    const inLanguage = (language: string) => get(path, { "accept-language": language });
    expect(seen(await inLanguage("en"))).toEqual([200, "en v1", "MISS"]); // the path varies
    const purged = await t.request("POST", `/v1/cdn/distributions/${distributionId}/purges`, {
      json: { paths: [path] },
    });
    expect(purged.status).toBe(200);

    const english = inLanguage("en");
    await waitUntil(() => served.get("en") === 2); // held by the origin
    const french = inLanguage("fr");
    await waitUntil(
      () => served.get("fr") === 1,
      HOLD_AT_MOST_MS / 2,
      "the French miss at the origin while the English one is held",
    );
    expect(seen(await french)).toEqual([200, "fr v1", "MISS"]);
    releaseEnglish();
    expect(seen(await english)).toEqual([200, "en v2", "MISS"]);
    expect(Object.fromEntries(served)).toEqual({ en: 2, fr: 1 });
  });

  it("gives viewers that waited on a failing revalidation the stale-if-error copy as the HIT it is", async () => {
    const path = "/failing.txt";
    let served = 0;
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
      setTimeout(resolve, HOLD_AT_MOST_MS).unref();
    });
    origin.route(`/root${path}`, async (_req: IncomingMessage, res: ServerResponse) => {
      if (++served === 1) {
        res.writeHead(200, { "cache-control": "max-age=1, stale-if-error=60" }).end("v1");
        return;
      }
      await released;
      res.writeHead(503).end("down");
    });
    expect(seen(await get(path))).toEqual([200, "v1", "MISS"]);
    clock.advance(2500); // stale, within stale-if-error

    const coalesced = async () =>
      sampleValue((await scrapeMetrics(t, METRICS_TOKEN)).samples, "cumulo_edge_coalesced_misses_total");
    const coalescedBefore = await coalesced();
    const leading = get(path);
    await waitUntil(() => served === 2);
    const waiting = get(path);
    await waitUntil(async () => (await coalesced()) > coalescedBefore, 10_000, "the second viewer waiting");
    release();
    for (const answer of await Promise.all([leading, waiting])) {
      expect([...seen(answer), answer.headers.age]).toEqual([200, "v1", "HIT", "2"]);
    }
    expect(served).toBe(2);
  });

  it("revalidates conditionally: a 304 makes the stored copy fresh again", async () => {
    const path = "/etag.txt";
    const conditions: string[] = [];
    origin.route(`/root${path}`, (req, res) => {
      const condition = req.headers["if-none-match"];
      if (condition === undefined) {
        res
          .writeHead(200, { etag: '"e1"', "cache-control": "max-age=1, stale-while-revalidate=60" })
          .end("same");
        return;
      }
      conditions.push(String(condition));
      res.writeHead(304, { etag: '"e1"', "cache-control": "max-age=60, stale-while-revalidate=60" }).end();
    });
    expect(seen(await get(path))).toEqual([200, "same", "MISS"]);
    clock.advance(1500);

    const stale = await get(path);
    expect([...seen(stale), stale.headers.age]).toEqual([200, "same", "HIT", "1"]);
    // The 304 renewed the copy's age and freshness.
    const refreshed = await waitUntil(async () => {
      const answer = await get(path);
      return answer.headers.age === "0" ? answer : undefined;
    });
    expect(seen(refreshed)).toEqual([200, "same", "HIT"]);
    expect(conditions).toEqual(['"e1"']);

    clock.advance(30_000); // within the 304's max-age=60
    expect(seen(await get(path))).toEqual([200, "same", "HIT"]);
    expect(origin.hitsOf(`/root${path}`)).toBe(2);
  });

  it("revalidates synchronously past the window", async () => {
    const path = "/window.txt";
    versioned(origin, path, { "cache-control": "max-age=1, stale-while-revalidate=2" });
    expect(seen(await get(path))).toEqual([200, "v1", "MISS"]);
    clock.advance(1500); // stale, within the 2 s window
    expect(seen(await get(path))).toEqual([200, "v1", "HIT"]);
    expect(seen(await getUntil(path, "v2"))).toEqual([200, "v2", "HIT"]);

    clock.advance(3500); // v2 is 3.5 s old: past its freshness (1 s) and the window (2 s more)
    expect(seen(await get(path))).toEqual([200, "v3", "MISS"]);
    expect(origin.hitsOf(`/root${path}`)).toBe(3);
  });

  it("does not store what a background revalidation fetched when a purge came meanwhile", async () => {
    const path = "/purged.txt";
    const held = await cachedThenStale(
      origin,
      clock,
      () => get(path),
      path,
      (n) => n === 2,
    );
    expect(seen(await get(path))).toEqual([200, "v1", "HIT"]);
    await waitUntil(() => origin.hitsOf(`/root${path}`) === 2);

    const purged = await t.request("POST", `/v1/cdn/distributions/${distributionId}/purges`, {
      json: { paths: [path] },
    });
    expect(purged.status).toBe(200);
    held.release();

    // Viewers still waiting on the revalidation get its answer (a miss), as viewers of any fetch that
    // was running when the purge came; it is not stored.
    const next = await get(path);
    expect(next.headers["x-cache"]).toBe("MISS");
    const after = await get(path);
    expect([after.headers["x-cache"], after.text]).not.toEqual(["HIT", "v2"]);
  });

  /**
   * A distribution of its own whose `path` answers `v1`, then `revalidated` to every later
   * (background) request, 50 ms late so its origin time is a whole millisecond or more.
   */
  const countedDistribution = async (
    path: string,
    revalidated: (req: IncomingMessage, res: ServerResponse) => void,
  ): Promise<string> => {
    const counted = uniqueHost("swr-stats");
    await createDistribution(t, { hostname: counted, origin_url: `${origin.url}/root` });
    let served = 0;
    origin.route(`/root${path}`, async (req, res) => {
      if (++served === 1) {
        res
          .writeHead(200, { etag: '"c1"', "cache-control": "max-age=1, stale-while-revalidate=600" })
          .end("v1");
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
      revalidated(req, res);
    });
    return counted;
  };
  /** Flushes the traffic counts until `counted`'s stored minutes show `fetches` origin requests. */
  const originFetchesCounted = (counted: string, fetches: number) =>
    waitUntil(
      async () => {
        await t.cumulo.services.cdnTraffic.flush();
        const distribution = await t.cumulo.services.cdn.distributionForHost(counted);
        const rows = await t.cumulo.store.db
          .selectFrom("cdn_traffic_minutes")
          .select("origin_fetches")
          .where("distribution_id", "=", distribution?.id ?? "")
          .execute();
        return rows.reduce((sum, row) => sum + Number(row.origin_fetches), 0) >= fetches;
      },
      30_000,
      `${fetches} origin requests of ${counted} counted`,
    );
  /** The analytics of `counted` (all metrics) in the one bucket of `granularity` from `from`. */
  const bucketOf = async (counted: string, granularity: "1m" | "1h", from: Date) => {
    const to = new Date(from.getTime() + (granularity === "1m" ? 60_000 : 3_600_000));
    const answer = await t.request(
      "GET",
      `/v1/cdn/analytics?from=${from.toISOString()}&to=${to.toISOString()}&granularity=${granularity}&distribution=${counted}`,
    );
    expect(answer.status).toBe(200);
    return (answer.body.Data as Record<string, number>[])[0];
  };
  const minuteOf = (at: Date) => new Date(Math.floor(at.getTime() / 60_000) * 60_000);

  /** Origin requests in the metrics' origin-time histogram (the slow-origin alert reads it). */
  const originTimesObserved = async () =>
    sampleValue((await scrapeMetrics(t, METRICS_TOKEN)).samples, "cumulo_edge_origin_duration_seconds_count");

  it("counts a stale copy's answer as the hit it is, and its background revalidation's origin bytes and time as no request", async () => {
    const counted = await countedDistribution("/counted.txt", (_req, res) =>
      res.writeHead(200, { "cache-control": "max-age=60" }).end("v2"),
    );
    const ask = () => edgeRequest(edge, `/${counted}/counted.txt`);
    expect(seen(await ask())).toEqual([200, "v1", "MISS"]); // 2 bytes from the origin
    clock.advance(60_000); // the next minute: its bucket holds only the hit and the revalidation
    const hitMinute = minuteOf(clock.now());
    const originTimesBefore = await originTimesObserved();
    expect(seen(await ask())).toEqual([200, "v1", "HIT"]); // 2 bytes from the cache, 2 more fetched

    await originFetchesCounted(counted, 2); // the miss's and the background revalidation's
    // The metrics' origin time has the background revalidation too (the hit asked no origin).
    expect((await originTimesObserved()) - originTimesBefore).toBe(1);
    const minute = await bucketOf(counted, "1m", hitMinute);
    expect(minute).toMatchObject({
      requests: 1,
      traffic: 2,
      cache_hit_traffic_ratio: 0, // 1 - 2 bytes from the origin / 2 bytes sent
      responses_2xx: 1,
      responses_3xx: 0,
    });
    expect(minute.upstream_origin_time_ms).toBeGreaterThan(0);
    const hour = await bucketOf(counted, "1h", new Date("2026-12-01T10:00:00Z"));
    expect(hour).toMatchObject({ requests: 2, traffic: 4, cache_hit_traffic_ratio: 0, responses_2xx: 2 });
    expect(hour.upstream_origin_time_ms).toBeGreaterThan(0);
  });

  it("counts a background revalidation answered 304 with its origin time and no bytes", async () => {
    const counted = await countedDistribution("/counted-304.txt", (_req, res) =>
      res.writeHead(304, { etag: '"c1"', "cache-control": "max-age=60" }).end(),
    );
    const ask = () => edgeRequest(edge, `/${counted}/counted-304.txt`);
    expect(seen(await ask())).toEqual([200, "v1", "MISS"]);
    clock.advance(60_000);
    const hitMinute = minuteOf(clock.now());
    expect(seen(await ask())).toEqual([200, "v1", "HIT"]);

    await originFetchesCounted(counted, 2); // the miss's and the background revalidation's
    const minute = await bucketOf(counted, "1m", hitMinute);
    expect(minute).toMatchObject({
      requests: 1,
      traffic: 2,
      cache_hit_traffic_ratio: 1,
      responses_2xx: 1,
      responses_3xx: 0, // the origin's 304 answered no viewer
    });
    expect(minute.upstream_origin_time_ms).toBeGreaterThan(0);
    expect(origin.hitsOf("/root/counted-304.txt")).toBe(2);
  });

  it("sends one background revalidation for concurrent viewers of a stale copy", async () => {
    const path = "/many.txt";
    const held = await cachedThenStale(origin, clock, () => get(path), path);

    const answers = await Promise.all(Array.from({ length: 5 }, () => get(path)));
    for (const answer of answers) expect(seen(answer)).toEqual([200, "v1", "HIT"]);
    await waitUntil(() => origin.hitsOf(`/root${path}`) >= 2);
    held.release();
    const renewed = await waitUntil(async () => {
      const answer = await get(path);
      return answer.text !== "v1" ? answer : undefined;
    });
    expect(seen(renewed)).toEqual([200, "v2", "HIT"]);
    expect(origin.hitsOf(`/root${path}`)).toBe(2);
  });
});

describe("CDN edge shutdown during a background revalidation", () => {
  it("gives the revalidation up instead of waiting for its origin", async () => {
    const clock = new TestClock(new Date("2026-12-01T10:00:00.000Z"));
    const t = await startTestApp({ ...EDGE_ENV, CUMULO_EDGE_ORIGIN_TIMEOUT_MS: "30000" }, { clock });
    const origin = await startOrigin();
    let closing = false;
    try {
      const host = uniqueHost("swr-stop");
      await createDistribution(t, { hostname: host, origin_url: `${origin.url}/root` });
      const path = "/slow.txt";
      const get = () => edgeRequest(edgeUrlOf(t), `/${host}${path}`);
      const held = await cachedThenStale(origin, clock, get, path);
      expect(seen(await get())).toEqual([200, "v1", "HIT"]);
      await waitUntil(() => origin.hitsOf(`/root${path}`) === 2);

      closing = true;
      await t.close();
      // Closed while the origin still held the revalidation.
      expect(held.answered).toBe(1);
    } finally {
      if (!closing) await t.close();
      await origin.close();
    }
  });
});
