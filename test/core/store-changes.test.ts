import { sql } from "kysely";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/store/database.ts";
import {
  CHANGE_TRIGGER,
  TRAFFIC_ROLLUPS,
  UNANNOUNCED_TABLES,
} from "../../src/store/migrations/0700-store-change-notifications.ts";
import { TRAFFIC_CHANGE_TRIGGER } from "../../src/store/migrations/0701-traffic-change-notifications.ts";
import { PgChangeGeneration } from "../../src/store/pg-change-generation.ts";
import type { PgListener } from "../../src/store/pg-listener.ts";
import { createTestStore, type TestStore, testStoreKind } from "../support/store.ts";

/**
 * The store generation that kept answers are checked against (src/http/response-cache.ts) moves for
 * every change, this process's or another's.
 */
describe("the store generation", () => {
  let testStore: TestStore;
  let store: Store;

  beforeAll(async () => {
    testStore = await createTestStore();
    store = openStore({ dataDir: testStore.dataDir, databaseUrl: testStore.databaseUrl });
    await store.migrate();
    await store.generation.start?.(() => {});
  });
  afterAll(async () => {
    await store.close();
    await testStore.drop();
  });

  const current = () => {
    const value = store.generation.current();
    if (value === undefined) throw new Error("the store generation is not known");
    return value;
  };

  it("moves when this process writes, and not when it only reads", async () => {
    const before = current();
    await sql`select count(*) from organizations`.execute(store.db);
    expect(current()).toBe(before);
    await sql`update organizations set name = name where id is null`.execute(store.db);
    expect(current()).not.toBe(before);
  });

  it.runIf(testStoreKind() === "postgres")(
    "does not move for a transaction's bounds; a commit after a write in it has moved it once caughtUp resolves",
    async () => {
      // Earlier tests' own commits are announced too: heard before counting.
      await store.generation.caughtUp?.();
      const before = current();
      await store.db.transaction().execute(async (trx) => {
        await sql`select count(*) from organizations`.execute(trx);
      });
      expect(current()).toBe(before);

      let beforeCommit = 0;
      await store.db.transaction().execute(async (trx) => {
        await sql`update organizations set name = name where id is null`.execute(trx);
        beforeCommit = current();
      });
      expect(beforeCommit).not.toBe(before);
      await store.generation.caughtUp?.();
      expect(current()).not.toBe(beforeCommit);
    },
  );

  it.runIf(testStoreKind() === "postgres")(
    "has moved for another connection's commit once caughtUp resolves",
    async () => {
      const other = new pg.Client({ connectionString: testStore.databaseUrl });
      await other.connect();
      try {
        for (let i = 0; i < 20; i++) {
          const before = current();
          await other.query("update organizations set name = name where id is null");
          await store.generation.caughtUp?.();
          expect(current()).not.toBe(before);
        }
        // A rolled back change announces nothing.
        const before = current();
        await other.query("begin");
        await other.query("update organizations set name = name where id is null");
        await other.query("rollback");
        await store.generation.caughtUp?.();
        expect(current()).toBe(before);
      } finally {
        await other.end();
      }
    },
  );

  it.runIf(testStoreKind() === "postgres")(
    "with the traffic rollups, has moved for another connection's traffic once caughtUp resolves; without them, has not",
    async () => {
      const other = new pg.Client({ connectionString: testStore.databaseUrl });
      await other.connect();
      try {
        const before = current();
        const withTrafficBefore = store.generationWithTraffic.current();
        await other.query("update cdn_traffic_minutes set requests = requests where minute < 0");
        await other.query("update cdn_organization_traffic_days set requests = requests where minute < 0");
        await store.generationWithTraffic.caughtUp?.();
        expect(store.generationWithTraffic.current()).toBeGreaterThan(
          withTrafficBefore ?? Number.POSITIVE_INFINITY,
        );
        expect(current()).toBe(before);

        await other.query("update organizations set name = name where id is null");
        await store.generationWithTraffic.caughtUp?.();
        expect(current()).not.toBe(before);
      } finally {
        await other.end();
      }
    },
  );

  it.runIf(testStoreKind() === "postgres")(
    "is announced by every table but the queue, traffic, session and job tables; traffic apart",
    async () => {
      const { rows } = await sql<{ name: string }>`
        select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and c.relkind = 'r' and not exists (
          select 1 from pg_trigger t where t.tgrelid = c.oid and t.tgname = ${CHANGE_TRIGGER})
        order by c.relname`.execute(store.db);
      expect(rows.map((row) => row.name)).toEqual([...UNANNOUNCED_TABLES].sort());

      const traffic = await sql<{ name: string }>`
        select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
        join pg_trigger t on t.tgrelid = c.oid and t.tgname = ${TRAFFIC_CHANGE_TRIGGER}
        where n.nspname = current_schema() order by c.relname`.execute(store.db);
      expect(traffic.rows.map((row) => row.name)).toEqual([...TRAFFIC_ROLLUPS].sort());
    },
  );
});

describe("PostgreSQL's catch-up round trips", () => {
  /** A listener whose `select 1` round trips the test answers by hand. */
  function fakeListener() {
    const waiting: (() => void)[] = [];
    const listener = {
      caughtUp: () => new Promise<void>((resolve) => waiting.push(resolve)),
    } as unknown as PgListener;
    const generation = new PgChangeGeneration(async (_channel, handlers) => {
      handlers.onListening();
      return listener;
    });
    return { generation, waiting };
  }

  it("serves the requests that came before a round trip was sent with it, and later ones with the next", async () => {
    const { generation, waiting } = fakeListener();
    await generation.start(() => {});
    const done: string[] = [];
    const first = generation.caughtUp().then(() => done.push("first"));
    // Sent while the first is on the wire: it may have been answered before these arrived.
    const second = generation.caughtUp().then(() => done.push("second"));
    const third = generation.caughtUp().then(() => done.push("third"));
    expect(waiting).toHaveLength(1);
    waiting[0]?.();
    await first;
    expect(done).toEqual(["first"]);
    // One more round trip, for both later requests.
    await Promise.resolve();
    expect(waiting).toHaveLength(2);
    waiting[1]?.();
    await Promise.all([second, third]);
    expect(done).toEqual(["first", "second", "third"]);
    // Nothing on the wire: the next request sends its own.
    const fourth = generation.caughtUp();
    expect(waiting).toHaveLength(3);
    waiting[2]?.();
    await fourth;
  });

  it("knows no generation while its connection is lost", async () => {
    let lose: (() => void) | undefined;
    const generation = new PgChangeGeneration(async (_channel, handlers) => {
      handlers.onListening();
      lose = () => handlers.onLost(new Error("gone"));
      return { caughtUp: async () => {} } as unknown as PgListener;
    });
    expect(generation.current()).toBeUndefined();
    const lost: unknown[] = [];
    await generation.start((error) => lost.push(error));
    expect(generation.current()).toEqual(expect.any(Number));
    lose?.();
    expect(generation.current()).toBeUndefined();
    expect(lost).toHaveLength(1);
  });
});
