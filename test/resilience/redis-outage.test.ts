import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDistribution, EDGE_ENV, type Origin, startOrigin, uniqueHost } from "../cdn/support.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { startTcpRelay, type TcpRelay } from "../support/tcp-relay.ts";
import { settledWithin, waitUntil } from "../support/wait.ts";

const redisUrl = process.env.TEST_REDIS_URL;
const BUDGET = 20;
const METRICS_TOKEN = "redis-outage-metrics-token-0123456789";

/** A relay in front of the test Redis, and the URL that reaches Redis through it. */
async function relayedRedis(): Promise<{ relay: TcpRelay; url: string }> {
  const url = new URL(redisUrl ?? "");
  const relay = await startTcpRelay(url.hostname, Number(url.port || 6379));
  url.hostname = "127.0.0.1";
  url.port = String(relay.port);
  return { relay, url: url.toString() };
}

/*
 * Redis going away under a running node (it holds the shared rate-limit counters and carries purges
 * and key changes). Before, every request answered 500 until it came back: the rate limit could not
 * count. Now each node counts for itself meanwhile, changes the other nodes also learn otherwise go
 * through, and only a purge, which the other edges would never apply, is refused with 503. Redis
 * behaves the same whatever the store, so this runs on SQLite only.
 */
describe.runIf(redisUrl && process.env.CUMULO_TEST_STORE !== "postgres")("a Redis outage", () => {
  let relay: TcpRelay;
  let origin: Origin;
  let t: TestApp;
  beforeAll(async () => {
    let url: string;
    ({ relay, url } = await relayedRedis());
    origin = await startOrigin();
    t = await startTestApp({ ...EDGE_ENV, REDIS_URL: url, CUMULO_RATE_LIMIT: `${BUDGET}/1m` });
  });
  afterAll(async () => {
    await t?.close();
    await relay?.close();
    await origin?.close();
  });

  it("keeps serving and counting budgets on the node, refuses purges with 503, and shares again once back", async () => {
    const before = await createDistribution(t, { hostname: uniqueHost("redis"), origin_url: origin.url });
    const other = await t.createOrganization("Budget org");
    const revoked = await t.createOrganization("Revoked org");
    await relay.cut();

    // Requests in flight or not, reads and writes go through; the budget is counted here.
    const statuses = await Promise.all(
      Array.from({ length: BUDGET }, () => t.request("GET", "/v1/media/libraries", { key: other.key })),
    );
    expect(statuses.map((answer) => answer.status)).toEqual(Array(BUDGET).fill(200));
    const over = await t.request("GET", "/v1/media/libraries", { key: other.key });
    expect(over.status).toBe(429);
    expect((await t.request("POST", "/v1/media/libraries", { json: { name: "during" } })).status).toBe(201);
    const during = await createDistribution(t, { hostname: uniqueHost("redis"), origin_url: origin.url });
    expect(during.id).toBeTruthy();

    // A purge the other edges could not hear is refused, to be sent again.
    const purge = await t.request("POST", `/v1/cdn/distributions/${before.id}/purges`, {
      json: { paths: ["/*"] },
    });
    expect(purge.status).toBe(503);
    expect(purge.headers.get("retry-after")).toBe("5");
    expect(purge.body).toMatchObject({ success: false, error: "service_unavailable" });

    // A revoked key is refused here at once; other nodes' cached entries expire within 2 s.
    const keys = await t.request("GET", "/v1/organization/api-keys", { key: revoked.key });
    const keyId = keys.body.data[0].id;
    expect(
      (await t.request("DELETE", `/v1/organization/api-keys/${keyId}`, { key: revoked.key })).status,
    ).toBe(204);
    expect((await t.request("GET", "/v1/media/libraries", { key: revoked.key })).status).toBe(401);
    expect((await t.request("GET", "/readyz", { anonymous: true })).status).toBe(200);

    await relay.restore();
    await waitUntil(
      async () =>
        (await t.request("POST", `/v1/cdn/distributions/${before.id}/purges`, { json: { paths: ["/*"] } }))
          .status === 200,
      15_000,
      "purges after Redis is back",
    );
  }, 60_000);
});

/*
 * Redis taking connections and never answering (a frozen process, a network dropping packets): before
 * session 59 every request waited for its rate-limit count as long as its client did, and a command
 * sent just before the freeze waited until Redis came back (src/bus.ts, REDIS_ANSWER_TIMEOUT_MS).
 */
describe.runIf(redisUrl && process.env.CUMULO_TEST_STORE !== "postgres")(
  "a Redis that stops answering",
  () => {
    /** Far longer than a command may wait for Redis (2 s): reaching it means a hang. */
    const HANG_MS = 15_000;
    let relay: TcpRelay;
    let t: TestApp;
    beforeAll(async () => {
      let url: string;
      ({ relay, url } = await relayedRedis());
      t = await startTestApp({
        REDIS_URL: url,
        CUMULO_RATE_LIMIT: `${BUDGET}/1m`,
        CUMULO_METRICS_TOKEN: METRICS_TOKEN,
      });
    });
    afterAll(async () => {
      relay?.thaw();
      await t?.close();
      await relay?.close();
    });
    const answered = <T>(request: Promise<T>) => settledWithin(request, HANG_MS, "the answer");

    it("answers every request, counting budgets on the node, and counts in Redis again once it answers", async () => {
      const other = await t.createOrganization("Frozen Redis org");
      relay.freeze();
      const statuses = await answered(
        Promise.all(
          Array.from({ length: BUDGET }, () => t.request("GET", "/v1/media/libraries", { key: other.key })),
        ).then((answers) => answers.map((answer) => answer.status)),
      );
      expect(statuses).toEqual(Array(BUDGET).fill(200));
      const over = await answered(t.request("GET", "/v1/media/libraries", { key: other.key }));
      expect(over.status).toBe(429);
      const write = await answered(t.request("POST", "/v1/media/libraries", { json: { name: "frozen" } }));
      expect(write.status).toBe(201);
      // The connection that stopped answering was dropped (requests meanwhile do not each wait for it).
      const redisUp = async () => {
        const scraped = await t.request("GET", "/metrics", {
          headers: { authorization: `Bearer ${METRICS_TOKEN}` },
        });
        return /^cumulo_redis_up (\d)$/m.exec(scraped.text)?.[1];
      };
      expect(await redisUp()).toBe("0");

      // Read beside the relay: the counts the node keeps in Redis (none was written while frozen).
      const direct = new Redis(redisUrl ?? "");
      try {
        const counts = async () => (await direct.keys(`${t.config.redisPrefix}rate-limit:*`)).length;
        const before = await counts();
        relay.thaw();
        await waitUntil(async () => (await redisUp()) === "1", 15_000, "Redis connected again");
        // The connection dropped as dead is made again, and a new key's budget is counted in Redis.
        const fresh = await t.createOrganization("Thawed Redis org");
        await waitUntil(
          async () => {
            expect((await t.request("GET", "/v1/media/libraries", { key: fresh.key })).status).toBe(200);
            return (await counts()) > before;
          },
          15_000,
          "a budget counted in Redis again",
        );
      } finally {
        direct.disconnect();
      }
    }, 60_000);
  },
);
