import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createTestStore } from "../support/store.ts";

const RATE_LIMITED = { success: false, error: "rate_limited", message: "Too many requests" };

describe("rate limit per key", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_RATE_LIMIT: "3/1m" });
  });
  afterAll(() => t.close());

  it("answers 429 with the contract body and headers once a key's budget is spent", async () => {
    for (let i = 0; i < 3; i++) {
      const response = await t.request("GET", "/v1/livestream/health");
      expect(response.status).toBe(200);
      expect(response.headers.get("ratelimit-limit")).toBe("3");
      expect(response.headers.get("ratelimit-remaining")).toBe(String(2 - i));
    }
    const limited = await t.request("GET", "/v1/livestream/health");
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual(RATE_LIMITED);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(limited.headers.get("ratelimit-remaining")).toBe("0");
    expect(Number(limited.headers.get("ratelimit-reset"))).toBeGreaterThan(0);
    // The same budget, in the cloud shape.
    const cloud = await t.cloud("GET", "/v1/storage/user");
    expect(cloud.status).toBe(429);
    expect(cloud.body).toEqual({ error: "rate_limited", message: "Too many requests" });
    expect(Number(cloud.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("counts a body it cannot read, and refuses it once the budget is spent", async () => {
    const { key } = await t.createOrganization("Malformed");
    const malformed = () =>
      t.request("POST", "/v1/media/libraries", {
        key,
        body: '{"x"',
        headers: { "content-type": "application/json" },
      });
    for (let i = 0; i < 3; i++) {
      const response = await malformed();
      expect(response.status).toBe(400);
      expect(response.headers.get("ratelimit-remaining")).toBe(String(2 - i));
    }
    const limited = await malformed();
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual(RATE_LIMITED);
  });

  it("keeps a separate budget for each key and leaves probes alone", async () => {
    const other = await t.createOrganization();
    expect((await t.request("GET", "/v1/livestream/health", { key: other.key })).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await t.request("GET", "/healthz")).status).toBe(200);
    for (let i = 0; i < 5; i++) {
      expect((await t.request("GET", "/docs", { anonymous: true })).status).toBe(200);
    }
  });
});

describe.runIf(process.env.TEST_REDIS_URL)("rate limit shared through Redis", () => {
  it("counts requests to two nodes against one budget", async () => {
    const first = await startTestApp({
      CUMULO_RATE_LIMIT: "4/1m",
      REDIS_URL: process.env.TEST_REDIS_URL ?? "",
    });
    const secondStore = await createTestStore();
    // The second node shares the first node's database and Redis, as nodes behind a load balancer do.
    const { startCumulo } = await import("../../src/roles.ts");
    const { loadConfig } = await import("../../src/config.ts");
    const second = await startCumulo(
      loadConfig({
        PORT: "0",
        CUMULO_EDGE_PORT: "off",
        CUMULO_LOG_LEVEL: "silent",
        CUMULO_RATE_LIMIT: "4/1m",
        REDIS_URL: process.env.TEST_REDIS_URL ?? "",
        CUMULO_REDIS_PREFIX: first.store.redisPrefix,
        CUMULO_DATA_DIR: first.store.kind === "sqlite" ? first.store.dataDir : secondStore.dataDir,
        ...(first.store.databaseUrl ? { DATABASE_URL: first.store.databaseUrl } : {}),
      }),
    );
    try {
      const org = await first.createOrganization("Shared budget");
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        const baseUrl = i % 2 === 0 ? first.baseUrl : (second.apiUrl ?? "");
        const response = await fetch(`${baseUrl}/v1/livestream/health`, {
          headers: { "x-api-key": org.key },
        });
        statuses.push(response.status);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
    } finally {
      await second.close();
      await first.close();
      await secondStore.drop();
    }
  });
});
