import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli.ts";
import { type Served, serve, stopAll } from "../support/process.ts";
import { createTestStore, type TestStore, testStoreKind } from "../support/store.ts";

/**
 * Two API processes, two worker processes and two edge processes (each a real `cumulo serve`), on one
 * PostgreSQL database and one Redis.
 */
const redisUrl = process.env.TEST_REDIS_URL;
const RATE = 20;
const ADMIN_KEY = "multi_node_admin_key_0123456789";
/** A bound on each request and CLI command of a test: a step that hangs fails, named, well before the test's timeout. */
const STEP_TIMEOUT_MS = 25_000;

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

interface Answer {
  status: number;
  body: any;
  text: string;
}

/** A request to one API process; media routes take the key as a bearer token, cloud routes as `apikey`. */
async function call(
  node: Served,
  method: string,
  path: string,
  options: { key?: string; json?: unknown; cloud?: boolean } = {},
): Promise<Answer> {
  const key = options.key ?? ADMIN_KEY;
  const headers: Record<string, string> = options.cloud
    ? { apikey: key }
    : { authorization: `Bearer ${key}` };
  if (options.json !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(node.apiUrl + path, {
    method,
    headers,
    body: options.json === undefined ? undefined : JSON.stringify(options.json),
    signal: AbortSignal.timeout(STEP_TIMEOUT_MS),
  }).catch((error: unknown) => {
    throw new Error(`${method} ${path} on ${node.apiUrl}: ${String(error)}`);
  });
  const text = await response.text();
  const json = (response.headers.get("content-type") ?? "").includes("json") && text !== "";
  return { status: response.status, body: json ? JSON.parse(text) : text, text };
}

/**
 * A CLI command in a process of its own, killed if it has not ended within `STEP_TIMEOUT_MS`: the
 * failure then names the command instead of the test timing out somewhere in it.
 */
async function cli(args: string[], env: Record<string, string>) {
  const result = await runCli(args, env, undefined, STEP_TIMEOUT_MS);
  if (result.code === null) {
    throw new Error(
      `cumulo ${args.join(" ")} did not end in ${STEP_TIMEOUT_MS} ms; stderr: ${result.stderr}`,
    );
  }
  return result;
}

/** What the CLI prints for `orgs create`: a new organization and its admin key. */
async function createOrganization(env: Record<string, string>, name: string) {
  const result = await cli(["orgs", "create", "--name", name], env);
  if (result.code !== 0) throw new Error(result.stderr);
  const created = JSON.parse(result.stdout) as {
    organization_id: string;
    api_key: string;
    billing_account_id: number;
  };
  return {
    organizationId: created.organization_id,
    key: created.api_key,
    billingAccountId: created.billing_account_id,
  };
}

/**
 * A key revoked or changed through one API process, or by the CLI in a process of its own, is refused
 * on both API processes at once: through Redis, or without it through PostgreSQL's notifications.
 */
function keyChangeCases(nodes: () => { apiA: Served; apiB: Served; env: Record<string, string> }) {
  it("refuses a deleted cloud token on both API processes at once", async () => {
    const { apiA, apiB, env } = nodes();
    const { key, billingAccountId } = await createOrganization(env, "token owner");
    const created = await call(apiA, "POST", "/v1/user-resource/token", {
      cloud: true,
      key,
      json: { billing_account_id: billingAccountId, description: "multi-node" },
    });
    expect(created.status).toBe(200);
    const { id, token } = created.body[0] as { id: number; token: string };
    // Both nodes have verified (and may have cached) the token.
    expect((await call(apiA, "GET", "/v1/config/locations", { cloud: true, key: token })).status).toBe(200);
    expect((await call(apiB, "GET", "/v1/config/locations", { cloud: true, key: token })).status).toBe(200);

    const deleted = await call(apiA, "DELETE", "/v1/user-resource/token", {
      cloud: true,
      key,
      json: { token_id: id },
    });
    expect(deleted.status).toBe(200);
    expect((await call(apiB, "GET", "/v1/config/locations", { cloud: true, key: token })).status).toBe(401);
    expect((await call(apiA, "GET", "/v1/config/locations", { cloud: true, key: token })).status).toBe(401);
  });

  it("applies a token becoming restricted on both API processes at once", async () => {
    const { apiA, apiB, env } = nodes();
    const { key, billingAccountId } = await createOrganization(env, "restricted owner");
    const created = await call(apiB, "POST", "/v1/user-resource/token", {
      cloud: true,
      key,
      json: { billing_account_id: billingAccountId },
    });
    const { id, token } = created.body[0] as { id: number; token: string };
    expect(
      (await call(apiA, "GET", "/v1/user-resource/token/list", { cloud: true, key: token })).status,
    ).toBe(200);
    expect(
      (await call(apiB, "GET", "/v1/user-resource/token/list", { cloud: true, key: token })).status,
    ).toBe(200);

    const patched = await call(apiB, "PATCH", "/v1/user-resource/token", {
      cloud: true,
      key,
      json: { token_id: id, restricted: true },
    });
    expect(patched.status).toBe(200);
    for (const node of [apiA, apiB]) {
      const refused = await call(node, "POST", "/v1/user-resource/token", {
        cloud: true,
        key: token,
        json: { billing_account_id: billingAccountId },
      });
      expect(refused.status).toBe(403);
    }
  });

  it("refuses a key revoked by the CLI (another process) on both API processes at once", async () => {
    const { apiA, apiB, env } = nodes();
    const { organizationId } = await createOrganization(env, "cli revoke");
    const made = await cli(["keys", "create", "--org", organizationId, "--name", "to revoke"], env);
    expect(made.code, made.stderr).toBe(0);
    const { id, api_key: key } = JSON.parse(made.stdout) as { id: number; api_key: string };
    for (const node of [apiA, apiB]) {
      expect((await call(node, "GET", "/v1/media/libraries", { key })).status).toBe(200);
    }
    const revoked = await cli(["keys", "revoke", String(id)], env);
    expect(revoked.code, revoked.stderr).toBe(0);
    for (const node of [apiB, apiA]) {
      expect((await call(node, "GET", "/v1/media/libraries", { key })).status).toBe(401);
    }
    // Three CLI processes: slow to start on a loaded machine.
  }, 90_000);
}

describe.runIf(testStoreKind() === "postgres" && redisUrl)(
  "several processes on one PostgreSQL and one Redis",
  () => {
    let store: TestStore;
    const nodes: Served[] = [];
    let apiA: Served;
    let apiB: Served;
    let edges: string[];
    let shared: Record<string, string>;

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
      shared = {
        DATABASE_URL: store.databaseUrl ?? "",
        CUMULO_DATA_DIR: store.dataDir,
        REDIS_URL: redisUrl ?? "",
        CUMULO_REDIS_PREFIX: store.redisPrefix,
        CUMULO_BOOTSTRAP_API_KEY: ADMIN_KEY,
        CUMULO_RATE_LIMIT: `${RATE}/1m`,
        CUMULO_ORIGIN_ALLOW_PRIVATE: "true",
        CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
      };
      // The first process migrates the store and creates the bootstrap organization; the rest start together.
      nodes.push(await serve({ ...shared, CUMULO_ROLES: "api" }));
      const roles = ["api", "worker", "worker", "edge", "edge"];
      nodes.push(
        ...(await Promise.all(
          roles.map((role) =>
            serve({ ...shared, CUMULO_ROLES: role, CUMULO_EDGE_PORT: role === "edge" ? "0" : "off" }),
          ),
        )),
      );
      [apiA, apiB] = nodes as [Served, Served];
      edges = nodes.slice(4).map((node) => node.edgeUrl ?? "");
    }, 90_000);

    afterAll(async () => {
      await stopAll(nodes);
      await store?.drop();
      origin.close();
      receiver.close();
    });

    it("shares one rate-limit budget per key across API processes", async () => {
      const { key } = await createOrganization(shared, "rate limited");
      const statuses: number[] = [];
      for (let i = 0; i < RATE; i++) {
        const node = i % 2 === 0 ? apiA : apiB;
        statuses.push((await call(node, "GET", "/v1/media/libraries", { key })).status);
      }
      expect(statuses).toEqual(Array(RATE).fill(200));
      // Each node saw only half the budget; the next request on either is over the shared one.
      const over = await call(apiB, "GET", "/v1/media/libraries", { key });
      expect(over.status).toBe(429);
      expect(over.body).toMatchObject({ success: false, error: "rate_limited" });
      expect((await call(apiA, "GET", "/v1/media/libraries", { key })).status).toBe(429);
    });

    keyChangeCases(() => ({ apiA, apiB, env: shared }));

    it("purges a distribution's cached objects on both edge processes before answering", async () => {
      const hostname = `multi-node-${Date.now()}.example.test`;
      const created = await call(apiA, "POST", "/v1/cdn/distributions", {
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
      const purged = await call(apiB, "POST", `/v1/cdn/distributions/${distributionId}/purges`, {
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
      const library = await call(apiA, "POST", "/v1/media/libraries", {
        json: { name: "multi-node hooks" },
      });
      const libraryId = (library.body as { data: { id: string } }).data.id;
      const endpoint = await call(apiB, "POST", `/v1/media/libraries/${libraryId}/webhooks`, {
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
        const video = await call(node, "POST", `/v1/media/libraries/${libraryId}/videos`, {
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

      const events = await call(
        apiA,
        "GET",
        `/v1/media/libraries/${libraryId}/webhooks/${endpointId}/events?limit=100`,
      );
      const records = (events.body as { data: { attempt: number; success: boolean }[] }).data;
      expect(records).toHaveLength(2 * videos);
      expect(records.filter((record) => record.attempt === 1 && !record.success)).toHaveLength(videos);
      expect(records.filter((record) => record.attempt === 2 && record.success)).toHaveLength(videos);
    }, 90_000);
  },
);

describe.runIf(testStoreKind() === "postgres")("two API processes on one PostgreSQL without Redis", () => {
  let store: TestStore;
  const nodes: Served[] = [];
  let env: Record<string, string>;

  beforeAll(async () => {
    store = await createTestStore("postgres");
    env = {
      DATABASE_URL: store.databaseUrl ?? "",
      CUMULO_DATA_DIR: store.dataDir,
      CUMULO_BOOTSTRAP_API_KEY: ADMIN_KEY,
    };
    // The first process migrates the store; the second starts on it.
    nodes.push(await serve({ ...env, CUMULO_ROLES: "api" }));
    nodes.push(await serve({ ...env, CUMULO_ROLES: "api" }));
  }, 90_000);

  afterAll(async () => {
    await stopAll(nodes);
    await store?.drop();
  });

  keyChangeCases(() => ({ apiA: nodes[0] as Served, apiB: nodes[1] as Served, env }));
});
