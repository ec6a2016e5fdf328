import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { runCli } from "../support/cli.ts";
import { createTestStore, type TestStore, testStoreKind } from "../support/store.ts";

/**
 * Two API nodes, two worker nodes and two edge nodes, each a separate Cumulo stack (own services, bus,
 * Redis connections, caches), on one PostgreSQL database and one Redis.
 */
const redisUrl = process.env.TEST_REDIS_URL;
const RATE = 20;

const until = async <T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 5000): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
};

const listen = async (server: Server): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

describe.runIf(testStoreKind() === "postgres" && redisUrl)(
  "several nodes on one PostgreSQL and one Redis",
  () => {
    let store: TestStore;
    const nodes: TestApp[] = [];
    let apiA: TestApp;
    let apiB: TestApp;
    let edges: string[];

    // Origin: its body changes with `version`, and it counts the requests it gets.
    let version = 1;
    let originHits = 0;
    const origin = createServer((_request, response) => {
      originHits++;
      response.writeHead(200, { "content-type": "text/plain", "cache-control": "public, max-age=3600" });
      response.end(`version ${version}`);
    });
    let originUrl: string;

    // Webhook receiver: fails the first arrival of each message, accepts the second; counts arrivals per id.
    const arrivals = new Map<string, number>();
    const receiver = createServer((request, response) => {
      request.resume();
      request.on("end", () => {
        const id = String(request.headers["webhook-id"]);
        const seen = (arrivals.get(id) ?? 0) + 1;
        arrivals.set(id, seen);
        response.writeHead(seen === 1 ? 500 : 200).end();
      });
    });
    let receiverUrl: string;

    beforeAll(async () => {
      originUrl = await listen(origin);
      receiverUrl = await listen(receiver);
      store = await createTestStore("postgres");
      const shared = {
        REDIS_URL: redisUrl ?? "",
        CUMULO_RATE_LIMIT: `${RATE}/1m`,
        CUMULO_ORIGIN_ALLOW_PRIVATE: "true",
        CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
      };
      // One after the other: the first start migrates the store and creates the bootstrap organization.
      for (const [roles, edgePort] of [
        ["api", "off"],
        ["api", "off"],
        ["worker", "off"],
        ["worker", "off"],
        ["edge", "0"],
        ["edge", "0"],
      ] as const) {
        nodes.push(
          await startTestApp({ ...shared, CUMULO_ROLES: roles, CUMULO_EDGE_PORT: edgePort }, { store }),
        );
      }
      [apiA, apiB] = nodes as [TestApp, TestApp];
      edges = nodes.slice(4).map((node) => node.cumulo.edgeUrl ?? "");
    }, 60_000);

    afterAll(async () => {
      for (const node of nodes) await node.close();
      await store?.drop();
      origin.close();
      receiver.close();
    });

    it("shares one rate-limit budget per key across API nodes", async () => {
      const { key } = await apiA.createOrganization("rate limited");
      const statuses: number[] = [];
      for (let i = 0; i < RATE; i++) {
        const node = i % 2 === 0 ? apiA : apiB;
        statuses.push((await node.request("GET", "/v1/media/libraries", { key })).status);
      }
      expect(statuses).toEqual(Array(RATE).fill(200));
      // Each node saw only half the budget; the next request on either is over the shared one.
      const over = await apiB.request("GET", "/v1/media/libraries", { key });
      expect(over.status).toBe(429);
      expect(over.body).toMatchObject({ success: false, error: "rate_limited" });
      expect((await apiA.request("GET", "/v1/media/libraries", { key })).status).toBe(429);
    });

    it("refuses a deleted cloud token on both API nodes at once", async () => {
      const { key, billingAccountId } = await apiA.createOrganization("token owner");
      const created = await apiA.cloud("POST", "/v1/user-resource/token", {
        key,
        json: { billing_account_id: billingAccountId, description: "multi-node" },
      });
      expect(created.status).toBe(200);
      const { id, token } = created.body[0] as { id: number; token: string };
      // Both nodes have verified (and may have cached) the token.
      expect((await apiA.cloud("GET", "/v1/config/locations", { key: token })).status).toBe(200);
      expect((await apiB.cloud("GET", "/v1/config/locations", { key: token })).status).toBe(200);

      const deleted = await apiA.cloud("DELETE", "/v1/user-resource/token", { key, json: { token_id: id } });
      expect(deleted.status).toBe(200);
      expect((await apiB.cloud("GET", "/v1/config/locations", { key: token })).status).toBe(401);
      expect((await apiA.cloud("GET", "/v1/config/locations", { key: token })).status).toBe(401);
    });

    it("applies a token becoming restricted on both API nodes at once", async () => {
      const { key, billingAccountId } = await apiA.createOrganization("restricted owner");
      const created = await apiB.cloud("POST", "/v1/user-resource/token", {
        key,
        json: { billing_account_id: billingAccountId },
      });
      const { id, token } = created.body[0] as { id: number; token: string };
      expect((await apiA.cloud("GET", "/v1/user-resource/token/list", { key: token })).status).toBe(200);
      expect((await apiB.cloud("GET", "/v1/user-resource/token/list", { key: token })).status).toBe(200);

      const patched = await apiB.cloud("PATCH", "/v1/user-resource/token", {
        key,
        json: { token_id: id, restricted: true },
      });
      expect(patched.status).toBe(200);
      for (const node of [apiA, apiB]) {
        const refused = await node.cloud("POST", "/v1/user-resource/token", {
          key: token,
          json: { billing_account_id: billingAccountId },
        });
        expect(refused.status).toBe(403);
      }
    });

    it("refuses a key revoked by the CLI (another process) on both API nodes at once", async () => {
      const { organizationId } = await apiA.createOrganization("cli revoke");
      const made = await apiA.cumulo.services.identity.createApiKey(organizationId, {
        name: "to revoke",
        readOnly: false,
      });
      if (made.outcome !== "created") throw new Error(made.outcome);
      for (const node of [apiA, apiB]) {
        expect((await node.request("GET", "/v1/media/libraries", { key: made.api_key })).status).toBe(200);
      }
      const revoked = await runCli(["keys", "revoke", String(made.id)], {
        DATABASE_URL: store.databaseUrl,
        CUMULO_DATA_DIR: store.dataDir,
        REDIS_URL: redisUrl,
        CUMULO_REDIS_PREFIX: store.redisPrefix,
      });
      expect(revoked.code, revoked.stderr).toBe(0);
      for (const node of [apiB, apiA]) {
        expect((await node.request("GET", "/v1/media/libraries", { key: made.api_key })).status).toBe(401);
      }
    });

    it("purges a distribution's cached objects on both edge nodes before answering", async () => {
      const hostname = `multi-node-${Date.now()}.example.test`;
      const created = await apiA.request("POST", "/v1/cdn/distributions", {
        json: { hostname, origin_url: originUrl },
      });
      expect(created.status, created.text).toBe(201);
      const distributionId = (created.body as { data: { id: string } }).data.id;
      const get = (edge: string) => fetch(`${edge}/${hostname}/file.txt`);

      for (const edge of edges) {
        // A new distribution reaches every edge within a second.
        await until(
          async () => ((await get(edge)).status === 200 ? true : undefined),
          "distribution on edge",
        );
        const cached = await get(edge);
        expect(cached.headers.get("x-cache")).toBe("HIT");
        expect(await cached.text()).toBe("version 1");
      }
      version = 2;
      const hitsBefore = originHits;
      const purged = await apiB.request("POST", `/v1/cdn/distributions/${distributionId}/purges`, {
        json: { paths: ["/*"] },
      });
      expect(purged.status).toBe(200);
      for (const edge of edges) {
        const fresh = await get(edge);
        expect(fresh.headers.get("x-cache")).toBe("MISS");
        expect(await fresh.text()).toBe("version 2");
      }
      expect(originHits - hitsBefore).toBe(2);
    });

    it("sends each webhook attempt once although two workers compete for deliveries", async () => {
      const library = await apiA.request("POST", "/v1/media/libraries", {
        json: { name: "multi-node hooks" },
      });
      const libraryId = (library.body as { data: { id: string } }).data.id;
      const endpoint = await apiB.request("POST", `/v1/media/libraries/${libraryId}/webhooks`, {
        json: {
          name: "receiver",
          url: `${receiverUrl}/hook`,
          events: ["created"],
          retry_policy: { max_attempts: 2, initial_delay_s: 0.2, multiplier: 1, max_delay_s: 1 },
        },
      });
      expect(endpoint.status, endpoint.text).toBe(201);
      const endpointId = (endpoint.body as { data: { id: string } }).data.id;

      const videos = 12;
      for (let i = 0; i < videos; i++) {
        const node = i % 2 === 0 ? apiA : apiB;
        const video = await node.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
          json: { title: `video ${i}` },
        });
        expect(video.status).toBe(201);
      }
      // Every message: attempt 1 refused, attempt 2 accepted, then no further sending.
      await until(
        async () =>
          arrivals.size === videos && [...arrivals.values()].every((count) => count >= 2) ? true : undefined,
        "two attempts per message",
        15_000,
      );
      await new Promise((resolve) => setTimeout(resolve, 700));
      expect([...arrivals.values()]).toEqual(Array(videos).fill(2));

      const events = await apiA.request(
        "GET",
        `/v1/media/libraries/${libraryId}/webhooks/${endpointId}/events?limit=100`,
      );
      const records = (events.body as { data: { attempt: number; success: boolean }[] }).data;
      expect(records).toHaveLength(2 * videos);
      expect(records.filter((record) => record.attempt === 1 && !record.success)).toHaveLength(videos);
      expect(records.filter((record) => record.attempt === 2 && record.success)).toHaveLength(videos);
    }, 30_000);
  },
);
