import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exitOf, type Served, serve } from "../support/process.ts";
import { createMigratedTestStore, type TestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import { uniqueHost } from "./support.ts";

const KEY = "edge_logs_key_0123456789abc";

/** What the edge tells an operator: before the QA of session 48 it logged nothing, not even an origin's failure. */
describe("edge logs", () => {
  let store: TestStore;
  let node: Served;
  beforeAll(async () => {
    store = await createMigratedTestStore();
    node = await serve({
      CUMULO_DATA_DIR: store.dataDir,
      DATABASE_URL: store.databaseUrl,
      CUMULO_BOOTSTRAP_API_KEY: KEY,
      CUMULO_EDGE_PORT: "0",
      CUMULO_ORIGIN_ALLOW_PRIVATE: "true",
    });
  });
  afterAll(async () => {
    if (node && node.child.exitCode === null) {
      node.child.kill("SIGTERM");
      await exitOf(node.child);
    }
    await store?.drop();
  });

  it("logs an unreachable origin once a minute per distribution, with the viewer's request id", async () => {
    const hostname = uniqueHost("dead-origin");
    const created = await fetch(`${node.apiUrl}/v1/cdn/distributions`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      // Port 9 (discard) answers no connection on a test machine.
      body: JSON.stringify({ hostname, origin_url: "http://127.0.0.1:9" }),
    });
    expect(created.status).toBe(201);
    const { data } = (await created.json()) as { data: { id: string } };
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const answer = await fetch(`${node.edgeUrl}/${hostname}/missing-${i}.txt`);
      expect(answer.status).toBe(502);
      ids.push(answer.headers.get("x-request-id") ?? "");
    }
    // The node's log reaches this process through a pipe, a moment after the answers.
    const logged = () =>
      node
        .output()
        .split("\n")
        .filter((line) => line.includes('"msg":"origin unreachable'))
        .map((line) => JSON.parse(line));
    await waitUntil(() => logged().length > 0, 5000, "the origin failure's log line");
    // A second or third line, were they written, would be in the same reads by now.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const lines = logged();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 40,
      reqId: ids[0],
      distribution: data.id,
      host: hostname,
      status: 502,
    });
  });
});
