import { setTimeout as sleep } from "node:timers/promises";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEY_CHANGE_ACK_TIMEOUT_MS, KEY_CHANGED_CHANNEL } from "../../src/identity/auth-cache.ts";
import { KEY_CHANGES_CHANNEL } from "../../src/store/migrations/0006-identity-key-notifications.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { testStoreKind } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";

const redisUrl = process.env.TEST_REDIS_URL;

/** Another node, played by the test: it hears key changes, and says it dropped its cache when told to. */
interface OtherNode {
  /** Ids of the key changes announced to it so far. */
  told: string[];
  acknowledge(change: string): Promise<void>;
  close(): Promise<void>;
}

/** On PostgreSQL without Redis: a session that listens, then takes the name every node's listener takes. */
async function otherNodeOnPostgres(databaseUrl: string): Promise<OtherNode> {
  const client = new pg.Client({ connectionString: databaseUrl });
  const told: string[] = [];
  client.on("notification", ({ payload }) => {
    const changed = payload?.startsWith("{")
      ? (JSON.parse(payload) as { changed?: string }).changed
      : undefined;
    if (changed) told.push(changed);
  });
  await client.connect();
  await client.query(`listen ${KEY_CHANGES_CHANNEL}`);
  await client.query(`set application_name = 'cumulo listener ${KEY_CHANGES_CHANNEL}'`);
  return {
    told,
    acknowledge: async (change) => {
      await client.query("select pg_notify($1, $2)", [
        KEY_CHANGES_CHANNEL,
        JSON.stringify({ heard: change, node: "played by the test" }),
      ]);
    },
    close: () => client.end(),
  };
}

/** With Redis: a subscriber on the bus channel of key changes, in the bus's own message format. */
async function otherNodeOnRedis(url: string, prefix: string): Promise<OtherNode> {
  const subscriber = new Redis(url);
  const publisher = new Redis(url);
  const told: string[] = [];
  subscriber.on("message", (_channel: string, raw: string) => {
    const { message } = JSON.parse(raw) as { message: string };
    const changed = (JSON.parse(message) as { changed?: string }).changed;
    if (changed) told.push(changed);
  });
  await subscriber.subscribe(prefix + KEY_CHANGED_CHANNEL);
  return {
    told,
    acknowledge: async (change) => {
      const message = JSON.stringify({ heard: change, node: "played by the test" });
      await publisher.publish(prefix + KEY_CHANGED_CHANNEL, JSON.stringify({ origin: "test", message }));
    },
    close: async () => {
      subscriber.disconnect();
      publisher.disconnect();
    },
  };
}

const setups: { name: string; env: Record<string, string>; run: boolean }[] = [
  { name: "PostgreSQL without Redis", env: {}, run: testStoreKind() === "postgres" },
  {
    name: "PostgreSQL with Redis",
    env: { REDIS_URL: redisUrl ?? "" },
    run: testStoreKind() === "postgres" && !!redisUrl,
  },
];

// SQLite needs no word from anyone: every node reads the store's data_version before using its cache.
for (const setup of setups) {
  describe.runIf(setup.run)(`a key change on ${setup.name}`, () => {
    let t: TestApp;
    let other: OtherNode;

    beforeAll(async () => {
      t = await startTestApp(setup.env);
      other = setup.env.REDIS_URL
        ? await otherNodeOnRedis(setup.env.REDIS_URL, t.store.redisPrefix)
        : await otherNodeOnPostgres(t.store.databaseUrl ?? "");
    });
    afterAll(async () => {
      await other?.close();
      await t?.close();
    });

    const createToken = async () => {
      const created = await t.cloud("POST", "/v1/user-resource/token", { form: { description: "acked" } });
      expect(created.status).toBe(200);
      return (created.body as { id: number }[])[0]?.id;
    };

    it("is answered only once every other node has said it dropped its cached keys", async () => {
      const id = await createToken();
      const toldBefore = other.told.length;
      const sent = performance.now();
      let answeredAt = Number.POSITIVE_INFINITY;
      const deletion = t
        .cloud("DELETE", "/v1/user-resource/token", { json: { token_id: id } })
        .finally(() => {
          answeredAt = performance.now();
        });
      const change = await waitUntil(() => other.told[toldBefore], 5000, "the other node to be told");
      // Told, but silent for a while: the deletion waits for its word.
      await sleep(KEY_CHANGE_ACK_TIMEOUT_MS / 10);
      const acknowledgedAt = performance.now();
      await other.acknowledge(change);
      expect((await deletion).status).toBe(200);
      // Answered after the word, or, should this machine be so slow that the word came later than
      // the wait allows, after the whole wait (timers may fire a millisecond early).
      const afterTheWord = answeredAt >= acknowledgedAt;
      const afterTheWholeWait = answeredAt - sent >= KEY_CHANGE_ACK_TIMEOUT_MS - 5;
      expect(afterTheWord || afterTheWholeWait, `answered ${answeredAt - sent} ms after it was sent`).toBe(
        true,
      );
    });

    it("is answered after a while when another node never says anything", async () => {
      const id = await createToken();
      const toldBefore = other.told.length;
      const started = performance.now();
      const deleted = await t.cloud("DELETE", "/v1/user-resource/token", { json: { token_id: id } });
      expect(deleted.status).toBe(200);
      expect(other.told).toHaveLength(toldBefore + 1);
      // Timers may fire a millisecond early.
      expect(performance.now() - started).toBeGreaterThanOrEqual(KEY_CHANGE_ACK_TIMEOUT_MS - 5);
    });
  });
}
