import type { ServerResponse } from "node:http";
import { Agent, fetch } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startOrigin, uniqueHost } from "../cdn/support.ts";
import { exitOf, serve } from "../support/process.ts";
import { createMigratedTestStore, type TestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import { startReceiver } from "../webhooks/helpers.ts";

const KEY = "graceful_test_key_0123456789abcdef";

describe("graceful shutdown", { timeout: 300_000 }, () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createMigratedTestStore();
  });
  afterAll(() => store.drop());

  it("answers every keep-alive request sent before SIGTERM and refuses only once closed", async () => {
    const served = await serve({
      CUMULO_DATA_DIR: store.dataDir,
      DATABASE_URL: store.databaseUrl,
      CUMULO_REDIS_PREFIX: store.redisPrefix,
      CUMULO_BOOTSTRAP_API_KEY: KEY,
      CUMULO_RATE_LIMIT: "1000000/1s",
      // Longer than any pause of a client on a busy CI machine: the drain ends as the last one leaves.
      CUMULO_SHUTDOWN_GRACE_MS: "10000",
    });
    const headers = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
    let ok = 0;
    let refused = 0;
    const failures: string[] = [];
    let toldToReconnect = 0;
    let signalled = false;
    const exited = exitOf(served.child);
    // Fetch keeps connections alive; each client loops until the server is gone. One connection per
    // client at most: a connection opened just as the signal arrives (a pool growing by one while all
    // are busy) would still be in the kernel's queue of unaccepted connections when the listening
    // socket closes, and the kernel resets those; no request was read from it, but the client could
    // not tell that reset from one of a request the server dropped, which is what this test looks for.
    const agent = new Agent({ connections: 8 });
    const client = async (n: number) => {
      for (let i = 0; ; i++) {
        try {
          const response = await fetch(`${served.apiUrl}/v1/media/libraries`, {
            method: "POST",
            headers,
            body: JSON.stringify({ name: `client ${n} #${i}` }),
            dispatcher: agent,
          });
          await response.text();
          if (response.status === 201) ok++;
          else failures.push(`status ${response.status}`);
          if (response.headers.get("connection") === "close") toldToReconnect++;
        } catch (error) {
          const code = (error as { cause?: { code?: string } }).cause?.code;
          // Refusals are expected only once the listener has closed, that is after the signal.
          if (code === "ECONNREFUSED" && signalled) {
            refused++;
            return;
          }
          failures.push(String(code ?? error));
          return;
        }
      }
    };
    const clients = Array.from({ length: 8 }, (_, n) => client(n));
    while (ok < 200) await new Promise((resolve) => setImmediate(resolve));
    signalled = true;
    served.child.kill("SIGTERM");
    await Promise.all(clients);
    await agent.close();
    expect(await exited).toBe(0);
    expect(failures).toEqual([]);
    expect(refused).toBe(8);
    expect(ok).toBeGreaterThanOrEqual(200);
    expect(toldToReconnect).toBeGreaterThan(0);
  });
  it("records every edge request answered before SIGTERM and hands back a webhook attempt it held", async () => {
    const origin = await startOrigin();
    origin.route("/cached", (_req, res) =>
      res.writeHead(200, { "cache-control": "max-age=600", "content-type": "text/plain" }).end("cached"),
    );
    origin.route("/fresh", (_req, res) =>
      res.writeHead(200, { "cache-control": "no-store", "content-type": "text/plain" }).end("fresh"),
    );
    // The first delivery is held unanswered, so the worker has it in hand when SIGTERM arrives; it and
    // every retry fail until the first process has exited, so only the restarted node can deliver.
    let held: ServerResponse | undefined;
    let firstExited = false;
    const receiver = await startReceiver((_request, res) => {
      if (!held) held = res;
      else if (firstExited) res.end("ok");
      else res.writeHead(503).end("busy");
    });
    const env = {
      CUMULO_DATA_DIR: store.dataDir,
      DATABASE_URL: store.databaseUrl,
      CUMULO_REDIS_PREFIX: store.redisPrefix,
      CUMULO_BOOTSTRAP_API_KEY: KEY,
      CUMULO_RATE_LIMIT: "1000000/1s",
      CUMULO_EDGE_PORT: "0",
      CUMULO_ORIGIN_ALLOW_PRIVATE: "true",
      CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
      // Counts reach the store only by the flush at shutdown: none can be written early by a timer.
      CUMULO_EDGE_ANALYTICS_FLUSH_MS: "3600000",
      CUMULO_SHUTDOWN_GRACE_MS: "10000",
    };
    const headers = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
    try {
      const first = await serve(env);
      const api = (method: string, path: string, body?: unknown) =>
        fetch(`${first.apiUrl}${path}`, { method, headers, body: body ? JSON.stringify(body) : undefined });
      const host = uniqueHost("graceful");
      const distribution = await api("POST", "/v1/cdn/distributions", {
        hostname: host,
        origin_url: origin.url,
      });
      expect(distribution.status).toBe(201);
      const dataOf = <T>(response: Response) => response.json() as Promise<{ data: T }>;
      const libraryId = (
        await dataOf<{ id: string }>(await api("POST", "/v1/media/libraries", { name: "hooks" }))
      ).data.id;
      const endpoint = await api("POST", `/v1/media/libraries/${libraryId}/webhooks`, {
        name: "hook",
        url: `${receiver.url}/hook`,
        events: ["*"],
        retry_policy: { max_attempts: 20, initial_delay_s: 0.1, max_delay_s: 1 },
      });
      expect(endpoint.status).toBe(201);
      const endpointId = (await dataOf<{ id: string }>(endpoint)).data.id;
      expect((await api("POST", `/v1/media/libraries/${libraryId}/videos`, { title: "v" })).status).toBe(201);
      await waitUntil(() => held, 20_000, "the webhook attempt to arrive");

      let answered = 0;
      let refused = 0;
      const failures: string[] = [];
      let signalled = false;
      const exited = exitOf(first.child);
      const edgeUrl = first.edgeUrl ?? "";
      // Keep-alive clients on cached and uncached paths, each looping until the edge is gone; one
      // connection each at most, as in the API's case above (a ninth, opened as the signal arrives,
      // would be reset by the kernel unread).
      const edgeAgent = new Agent({ connections: 8 });
      const client = async (n: number) => {
        for (;;) {
          try {
            const response = await fetch(`${edgeUrl}/${host}/${n % 2 ? "cached" : "fresh"}?c=${n % 4}`, {
              dispatcher: edgeAgent,
            });
            await response.text();
            if (response.status === 200) answered++;
            else failures.push(`status ${response.status}`);
          } catch (error) {
            const code = (error as { cause?: { code?: string } }).cause?.code;
            if (code === "ECONNREFUSED" && signalled) {
              refused++;
              return;
            }
            failures.push(String(code ?? error));
            return;
          }
        }
      };
      const clients = Array.from({ length: 8 }, (_, n) => client(n));
      while (answered < 300 && failures.length === 0) await new Promise((resolve) => setImmediate(resolve));
      signalled = true;
      first.child.kill("SIGTERM");
      // The held attempt fails while the node is closing: the worker finishes it and schedules the retry.
      await waitUntil(() => first.output().includes("SIGTERM received"), 10_000, "the shutdown to begin");
      held?.writeHead(503).end("busy");
      await Promise.all(clients);
      await edgeAgent.close();
      expect(await exited).toBe(0);
      firstExited = true;
      expect(failures).toEqual([]);
      expect(refused).toBe(8);

      const second = await serve(env);
      try {
        const since = new Date(Date.now() - 3_600_000).toISOString();
        const analytics = await fetch(
          `${second.apiUrl}/v1/cdn/analytics?from=${since}&granularity=1m&distribution=${host}&metrics=requests`,
          { headers },
        );
        expect(analytics.status).toBe(200);
        const rows = ((await analytics.json()) as { Data: { requests: number }[] }).Data;
        expect(rows.reduce((total, row) => total + Number(row.requests), 0)).toBe(answered);

        // The attempt in hand at SIGTERM was not lost: its retry is delivered by the restarted node.
        const delivered = await waitUntil(
          async () => {
            const events = await fetch(
              `${second.apiUrl}/v1/media/libraries/${libraryId}/webhooks/${endpointId}/events?limit=100`,
              { headers },
            );
            const records = (await dataOf<{ event: string; success: boolean; attempt: number }[]>(events))
              .data;
            const created = records.filter((record) => record.event === "created");
            return created.some((record) => record.success) ? created : undefined;
          },
          20_000,
          "the held webhook to be delivered after the restart",
        );
        // Attempts 1..n, each once, and only the last (by the restarted node) succeeded.
        const attempts = delivered.map((record) => record.attempt).sort((a, b) => a - b);
        expect(attempts).toEqual(Array.from({ length: attempts.length }, (_, i) => i + 1));
        expect(attempts.length).toBeGreaterThanOrEqual(2);
        const successes = delivered.filter((record) => record.success).map((record) => record.attempt);
        expect(successes).toEqual([attempts.length]);
      } finally {
        const stopped = exitOf(second.child);
        second.child.kill("SIGTERM");
        expect(await stopped).toBe(0);
      }
    } finally {
      held?.destroy();
      await receiver.close();
      await origin.close();
    }
  });
});
