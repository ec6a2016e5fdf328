import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PgListener } from "../../src/store/pg-listener.ts";
import { createTestStore, type TestStore, testStoreKind } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";

const CHANNEL = "cumulo_listener_test";
const NAME = `cumulo listener ${CHANNEL}`;

/**
 * Other nodes count the sessions they notify by the listener's name (`notifyOthers`) and wait for a
 * word from each, so a session may carry that name only once its LISTEN is in effect.
 */
describe.runIf(testStoreKind() === "postgres")("a PostgreSQL listener", () => {
  let testStore: TestStore;
  let observer: pg.Client;
  const query = pg.Client.prototype.query;

  beforeAll(async () => {
    testStore = await createTestStore();
    observer = new pg.Client({ connectionString: testStore.databaseUrl });
    await observer.connect();
  });
  afterEach(() => {
    pg.Client.prototype.query = query;
  });
  afterAll(async () => {
    await observer.end();
    await testStore.drop();
  });

  const named = async () =>
    (
      await observer.query(
        "select count(*)::int as sessions from pg_stat_activity where datname = current_database() and application_name = $1",
        [NAME],
      )
    ).rows[0].sessions as number;

  it("takes the name other nodes count only after its LISTEN is in effect", async () => {
    // The listener's LISTEN has run on the server, but its answer is held back from the listener.
    let listened!: () => void;
    const held = new Promise<void>((resolve) => {
      listened = resolve;
    });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const result = (query as (...args: unknown[]) => unknown).apply(this, args);
      if (typeof args[0] === "string" && args[0].startsWith("LISTEN")) {
        return (result as Promise<unknown>).then(async (answer) => {
          listened();
          await released;
          return answer;
        });
      }
      return result;
    } as typeof query;

    let listening = false;
    const listener = new PgListener(testStore.databaseUrl ?? "", CHANNEL, {
      onListening: () => {
        listening = true;
      },
      onNotification: () => {},
      onLost: () => {},
    });
    const started = listener.start();
    try {
      await held;
      expect(await named()).toBe(0);
      release();
      await started;
      expect(listening).toBe(true);
      expect(await named()).toBe(1);

      // Named, it hears what is sent: the count another node makes is of sessions it reaches.
      const heard: string[] = [];
      const second = new PgListener(testStore.databaseUrl ?? "", CHANNEL, {
        onListening: () => {},
        onNotification: (payload) => heard.push(payload),
        onLost: () => {},
      });
      await second.start();
      try {
        expect(await listener.notifyOthers("hello")).toBe(1);
        await waitUntil(() => heard.includes("hello"), 5000, "the other listener to hear it");
      } finally {
        await second.close();
      }
    } finally {
      release();
      await listener.close();
    }
  });
});
