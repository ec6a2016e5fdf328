import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { type RunningCumulo, startCumulo } from "../../src/roles.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import {
  createDistribution,
  EDGE_ENV,
  edgeRequest,
  edgeUrlOf,
  type Origin,
  startOrigin,
  uniqueHost,
} from "./support.ts";

const redisUrl = process.env.TEST_REDIS_URL;

/** Writes both nodes' traffic counts and answers the requests analytics holds (for one host, or all). */
const countedRequests = async (t: TestApp, second: RunningCumulo, host?: string): Promise<number> => {
  await second.services.cdnTraffic.flush();
  await t.cumulo.services.cdnTraffic.flush();
  const analytics = await t.request(
    "GET",
    `/v1/cdn/analytics?granularity=1d&metrics=requests${host ? `&distribution=${host}` : ""}`,
  );
  expect(analytics.status, analytics.text).toBe(200);
  return analytics.body.Data.reduce((sum: number, row: { requests: number }) => sum + row.requests, 0);
};

// Two nodes on one store and one Redis: the test app (api + edge) and a second edge-only node.
describe.skipIf(!redisUrl)("CDN purge across edge nodes (Redis)", () => {
  let t: TestApp;
  let second: RunningCumulo;
  let origin: Origin;

  beforeAll(async () => {
    const env = {
      ...EDGE_ENV,
      REDIS_URL: redisUrl ?? "",
      CUMULO_RATE_LIMIT: "100000/60s",
      CUMULO_DEV_MODE: "true",
      // Traffic counts stay in memory until a test writes them.
      CUMULO_EDGE_ANALYTICS_FLUSH_MS: "60000",
    };
    t = await startTestApp(env);
    second = await startCumulo(
      loadConfig({
        ...env,
        PORT: "0",
        CUMULO_ROLES: "edge",
        CUMULO_LOG_LEVEL: "silent",
        CUMULO_DATA_DIR: t.store.dataDir,
        CUMULO_REDIS_PREFIX: t.store.redisPrefix,
        ...(t.store.databaseUrl ? { DATABASE_URL: t.store.databaseUrl } : {}),
      }),
    );
    origin = await startOrigin();
  });
  afterAll(async () => {
    await second?.close();
    await t?.close();
    await origin?.close();
  });

  it("purges every node's cache before the purge is answered", async () => {
    let version = 1;
    origin.route("/shared.txt", (_req, res) =>
      res.writeHead(200, { "cache-control": "max-age=600" }).end(`v${version}`),
    );
    const host = uniqueHost("redis");
    const distribution = await createDistribution(t, { hostname: host, origin_url: origin.url });
    const edges = [edgeUrlOf(t), second.edgeUrl ?? ""];
    for (const edge of edges) {
      expect((await edgeRequest(edge, `/${host}/shared.txt`)).headers["x-cache"]).toBe("MISS");
      expect((await edgeRequest(edge, `/${host}/shared.txt`)).headers["x-cache"]).toBe("HIT");
    }
    version = 2;
    const started = Date.now();
    const purge = await t.request("POST", `/v1/cdn/distributions/${distribution.id}/purges`, {
      json: { paths: ["/shared*"] },
    });
    expect(purge.status).toBe(200);
    const purgeMs = Date.now() - started;
    for (const edge of edges) {
      const fresh = await edgeRequest(edge, `/${host}/shared.txt`);
      expect(fresh.headers["x-cache"], `${edge}, purge answered in ${purgeMs} ms`).toBe("MISS");
      expect(fresh.text).toBe("v2");
    }
    expect(origin.hitsOf("/shared.txt")).toBe(4);
  });

  it("starts from an empty cache after losing Redis, since purges sent meanwhile were lost", async () => {
    origin.route("/kept.txt", (_req, res) =>
      res.writeHead(200, { "cache-control": "max-age=600" }).end("kept"),
    );
    const host = uniqueHost("redis-lost");
    await createDistribution(t, { hostname: host, origin_url: origin.url });
    const edges = [edgeUrlOf(t), second.edgeUrl ?? ""];
    let served = 0;
    for (const edge of edges) {
      await edgeRequest(edge, `/${host}/kept.txt`);
      expect((await edgeRequest(edge, `/${host}/kept.txt`)).headers["x-cache"]).toBe("HIT");
      served += 2;
    }
    // Cut every node's bus connection (found by name); each reconnects and drops its cache.
    const admin = new Redis(redisUrl ?? "");
    try {
      const clients = String(await admin.call("CLIENT", "LIST")).split("\n");
      const ids = clients
        .filter((line) => line.includes(`name=${t.store.redisPrefix}bus `))
        .map((line) => /\bid=(\d+)/.exec(line)?.[1] ?? "");
      expect(ids.length).toBeGreaterThanOrEqual(2);
      for (const id of ids) await admin.call("CLIENT", "KILL", "ID", id);
    } finally {
      admin.disconnect();
    }
    for (const edge of edges) {
      const deadline = Date.now() + 5000;
      let cache = "HIT";
      while (cache === "HIT" && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        cache = String((await edgeRequest(edge, `/${host}/kept.txt`)).headers["x-cache"]);
        served += 1;
      }
      expect(cache, edge).toBe("MISS");
    }
    // The caches were dropped; the traffic counted in memory was not (only a reset drops it).
    expect(await countedRequests(t, second, host)).toBe(served);
  });

  it("serves a new distribution from every node within a second", async () => {
    origin.route("/new.txt", (_req, res) => res.writeHead(200).end("new"));
    const host = uniqueHost("redis-new");
    // ask the second node first, so it has a negative answer in its memory
    expect((await edgeRequest(second.edgeUrl ?? "", `/${host}/new.txt`)).status).toBe(404);
    await createDistribution(t, { hostname: host, origin_url: origin.url });
    const deadline = Date.now() + 1000;
    let status = 0;
    while (Date.now() < deadline) {
      status = (await edgeRequest(second.edgeUrl ?? "", `/${host}/new.txt`)).status;
      if (status === 200) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(status).toBe(200);
  });

  it("drops what every edge node counted before a reset, before the reset is answered", async () => {
    origin.route("/counted.txt", (_req, res) => res.writeHead(200).end("counted"));
    const host = uniqueHost("redis-reset");
    await createDistribution(t, { hostname: host, origin_url: origin.url });
    for (const edge of [edgeUrlOf(t), second.edgeUrl ?? ""]) {
      expect((await edgeRequest(edge, `/${host}/counted.txt`)).status).toBe(200);
    }
    const reset = await t.request("POST", "/_cumulo/state/reset", { json: { to: "bootstrap" } });
    expect(reset.status, reset.text).toBe(200);
    expect(await countedRequests(t, second)).toBe(0);
  });
});
