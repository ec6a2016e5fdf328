import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
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

const seen = (answer: EdgeResponse) => [answer.status, answer.text, answer.headers["x-cache"]];

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
    t = await startTestApp({ ...EDGE_ENV, CUMULO_EDGE_ORIGIN_TIMEOUT_MS: "30000" }, { clock });
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
    const held = versioned(
      origin,
      path,
      { "cache-control": "max-age=1, stale-while-revalidate=60" },
      (n) => n > 1,
    );
    expect(seen(await get(path))).toEqual([200, "v1", "MISS"]);
    clock.advance(1500);

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
    const held = versioned(
      origin,
      path,
      { "cache-control": "max-age=1, stale-while-revalidate=60" },
      (n) => n === 2,
    );
    expect(seen(await get(path))).toEqual([200, "v1", "MISS"]);
    clock.advance(1500);
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

  it("counts a stale copy's answer in analytics as the hit it says it is", async () => {
    const counted = uniqueHost("swr-stats");
    await createDistribution(t, { hostname: counted, origin_url: `${origin.url}/root` });
    versioned(origin, "/counted.txt", { "cache-control": "max-age=1, stale-while-revalidate=60" });
    const ask = () => edgeRequest(edge, `/${counted}/counted.txt`);
    expect(seen(await ask())).toEqual([200, "v1", "MISS"]); // 2 bytes from the origin
    clock.advance(1500);
    expect(seen(await ask())).toEqual([200, "v1", "HIT"]); // 2 bytes from the cache

    const bucket = await waitUntil(async () => {
      await t.cumulo.services.cdnTraffic.flush();
      const answer = await t.request(
        "GET",
        `/v1/cdn/analytics?from=2026-12-01T10:00:00Z&to=2026-12-01T11:00:00Z&granularity=1h&distribution=${counted}&metrics=requests,traffic,cache_hit_traffic_ratio`,
      );
      const [row] = answer.body.Data as Record<string, number>[];
      return row?.requests === 2 ? row : undefined;
    });
    expect(bucket).toMatchObject({ requests: 2, traffic: 4, cache_hit_traffic_ratio: 0.5 });
  });

  it("sends one background revalidation for concurrent viewers of a stale copy", async () => {
    const path = "/many.txt";
    const held = versioned(
      origin,
      path,
      { "cache-control": "max-age=1, stale-while-revalidate=60" },
      (n) => n > 1,
    );
    expect(seen(await get(path))).toEqual([200, "v1", "MISS"]);
    clock.advance(1500);

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
      const held = versioned(
        origin,
        path,
        { "cache-control": "max-age=1, stale-while-revalidate=60" },
        (n) => n > 1,
      );
      const get = () => edgeRequest(edgeUrlOf(t), `/${host}${path}`);
      expect(seen(await get())).toEqual([200, "v1", "MISS"]);
      clock.advance(1500);
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
