import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDistribution, EDGE_ENV, type Origin, startOrigin, uniqueHost } from "../cdn/support.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { startTcpRelay, type TcpRelay } from "../support/tcp-relay.ts";
import { waitUntil } from "../support/wait.ts";

const redisUrl = process.env.TEST_REDIS_URL;
const BUDGET = 20;

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
    const url = new URL(redisUrl ?? "");
    relay = await startTcpRelay(url.hostname, Number(url.port || 6379));
    url.hostname = "127.0.0.1";
    url.port = String(relay.port);
    origin = await startOrigin();
    t = await startTestApp({ ...EDGE_ENV, REDIS_URL: url.toString(), CUMULO_RATE_LIMIT: `${BUDGET}/1m` });
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
