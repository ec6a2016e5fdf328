import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { testStoreKind, writeFromAnotherConnection } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";

/**
 * Answers of routes marked `storedDataOnly` (kept and served again, src/http/response-cache.ts) follow
 * every change at once, whoever makes it, on both stores.
 */
describe("kept answers follow every change", () => {
  let t: TestApp;
  const LIST = "/v1/media/libraries?limit=20";

  const names = async (key?: string) =>
    (await t.request("GET", LIST, key ? { key } : {})).body.data.map(
      (library: { name: string }) => library.name,
    );

  /** A write by another connection of another process, as the CLI or a second node would make. */
  async function renameElsewhere(id: string, name: string): Promise<void> {
    if (t.store.databaseUrl) {
      const client = new pg.Client({ connectionString: t.store.databaseUrl });
      await client.connect();
      try {
        await client.query("update libraries set name = $1 where id = $2", [name, id]);
      } finally {
        await client.end();
      }
      return;
    }
    await writeFromAnotherConnection(t.store.dataDir, (other) =>
      other.prepare("update libraries set name = ? where id = ?").run(name, id),
    );
  }

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it("shows a write made through the API and one made by another connection", async () => {
    const created = await t.request("POST", "/v1/media/libraries", { json: { name: "first name" } });
    const id = created.body.data.id as string;
    const first = await t.request("GET", LIST);
    const again = await t.request("GET", LIST);
    expect(again.headers.get("x-request-id")).not.toBe(first.headers.get("x-request-id"));
    expect(await names()).toEqual(["first name"]);

    await t.request("PATCH", `/v1/media/libraries/${id}`, { json: { name: "renamed" } });
    expect(await names()).toEqual(["renamed"]);
    expect((await t.request("GET", `/v1/media/libraries/${id}`)).body.data.name).toBe("renamed");

    await renameElsewhere(id, "renamed elsewhere");
    expect(await names()).toEqual(["renamed elsewhere"]);
    expect((await t.request("GET", `/v1/media/libraries/${id}`)).body.data.name).toBe("renamed elsewhere");

    await t.request("DELETE", `/v1/media/libraries/${id}`);
    expect(await names()).toEqual([]);
    expect((await t.request("GET", `/v1/media/libraries/${id}`)).status).toBe(404);
  });

  it("answers each organization and each key for itself on the same URL", async () => {
    await t.request("POST", "/v1/media/libraries", { json: { name: "ours" } });
    const other = await t.createOrganization("Kept answers org");
    await t.request("POST", "/v1/media/libraries", { json: { name: "theirs" }, key: other.key });
    for (let i = 0; i < 2; i++) {
      expect(await names()).toEqual(["ours"]);
      expect(await names(other.key)).toEqual(["theirs"]);
    }
    expect((await t.request("GET", LIST, { anonymous: true })).status).toBe(401);
    expect((await t.request("GET", LIST, { key: "not-a-key-0123456789abcdef" })).status).toBe(401);
  });

  it("still refuses a revoked key on a route whose answer was kept", async () => {
    const created = await t.request("POST", "/v1/organization/api-keys", { json: { name: "short-lived" } });
    const key = created.body.data.api_key as string;
    expect((await t.request("GET", LIST, { key })).status).toBe(200);
    expect((await t.request("GET", LIST, { key })).status).toBe(200);
    await t.request("DELETE", `/v1/organization/api-keys/${created.body.data.id}`);
    expect((await t.request("GET", LIST, { key })).status).toBe(401);
  });

  it.runIf(testStoreKind() === "postgres")(
    "keeps nothing while the store-change listener is lost, and keeps again once it is back",
    async () => {
      const { generation } = t.cumulo.store;
      const created = await t.request("POST", "/v1/media/libraries", { json: { name: "listened" } });
      const id = created.body.data.id as string;
      expect(await names()).toContain("listened");

      const admin = new pg.Client({ connectionString: t.store.databaseUrl });
      await admin.connect();
      try {
        await admin.query(
          `select pg_terminate_backend(pid) from pg_stat_activity
           where datname = current_database() and application_name = 'cumulo listener cumulo_store_changes'`,
        );
      } finally {
        await admin.end();
      }
      await waitUntil(() => generation.current() === undefined, 10_000, "the listener to be lost");
      // Another process's commit now goes unheard: only not keeping answers keeps them right.
      expect(await names()).toContain("listened");
      await renameElsewhere(id, "unheard");
      expect(await names()).toContain("unheard");

      await waitUntil(() => generation.current() !== undefined, 10_000, "the listener to be back");
      expect(await names()).toContain("unheard");
      await renameElsewhere(id, "heard again");
      expect(await names()).toContain("heard again");
      await t.request("DELETE", `/v1/media/libraries/${id}`);
    },
  );

  it("answers HEAD and a cloud route from the same rules", async () => {
    expect((await t.request("HEAD", LIST)).status).toBe(200);
    const billing = (await t.cloud("GET", "/v1/payment/billing_account/list")).body[0];
    const created = await t.cloud("POST", "/v1/network/ip_addresses", {
      json: { billing_account_id: billing.id },
    });
    expect(created.status).toBe(200);
    const address = created.body.address as string;
    const path = `/v1/network/ip_addresses/${address}`;
    expect((await t.cloud("GET", path)).status).toBe(200);
    expect((await t.cloud("GET", path)).status).toBe(200);
    await t.cloud("DELETE", path);
    expect((await t.cloud("GET", path)).status).toBe(404);
  });

  // SQLite: the job and webhook workers poll their queues every second; a poll that finds nothing
  // changes nothing, so kept answers and reads stay (PostgreSQL's generation ignores reads and a
  // transaction's bounds alike).
  it.skipIf(testStoreKind() !== "sqlite")(
    "keeps its answers while an idle server's workers poll",
    async () => {
      const before = t.cumulo.store.generation.current();
      expect(before).toBeDefined();
      await new Promise((resolve) => setTimeout(resolve, 2500));
      expect(t.cumulo.store.generation.current()).toBe(before);
    },
  );
});

describe("kept answers under a small request budget", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_RATE_LIMIT: "3/60s" });
  });
  afterAll(() => t.close());

  it("counts every kept answer against the caller's budget", async () => {
    const remaining = [];
    for (let i = 0; i < 3; i++) {
      const read = await t.request("GET", "/v1/media/libraries?limit=20");
      expect(read.status).toBe(200);
      remaining.push(read.headers.get("ratelimit-remaining"));
    }
    expect(remaining).toEqual(["2", "1", "0"]);
    const refused = await t.request("GET", "/v1/media/libraries?limit=20");
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ success: false, error: "rate_limited" });
  });
});
