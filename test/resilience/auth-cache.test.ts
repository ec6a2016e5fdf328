import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus.ts";
import { AuthCache, KEY_CHANGED_CHANNEL } from "../../src/identity/auth-cache.ts";
import { hashSecret } from "../../src/identity/keys.ts";
import type { AuthContext } from "../../src/identity/service.ts";
import { KEY_CHANGES_CHANNEL } from "../../src/store/migrations/0006-identity-key-notifications.ts";
import type { ListenHandlers, PgListener } from "../../src/store/pg-listener.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { runCli } from "../support/cli.ts";
import { testStoreKind } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";

const auth: AuthContext = {
  organizationId: "00000000-0000-4000-8000-000000000001",
  userId: 1,
  userUuid: "00000000-0000-4000-8000-000000000002",
  keyId: 7,
  kind: "organization",
  readOnly: false,
  restricted: false,
  billingAccountId: null,
};
const NOW = "2026-11-21T10:00:00.000Z";

/** A clock the test moves by hand. */
function handClock() {
  let now = Date.parse(NOW);
  return {
    now: () => new Date(now),
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe("auth cache", () => {
  it("serves nothing until it listens to key changes", async () => {
    const cache = new AuthCache(60_000, handClock());
    cache.set("hash", auth, null, cache.generation);
    expect(cache.get("hash")).toBeUndefined();
    await cache.listen(new LocalBus());
    cache.set("hash", auth, null, cache.generation);
    expect(cache.get("hash")).toEqual(auth);
  });

  it("drops every entry when a key change is published", async () => {
    const bus = new LocalBus();
    const cache = new AuthCache(60_000, handClock());
    await cache.listen(bus);
    cache.set("hash", auth, null, cache.generation);
    await bus.publish(KEY_CHANGED_CHANNEL, "7");
    expect(cache.get("hash")).toBeUndefined();
  });

  it("does not keep a lookup that was in flight when a key changed", async () => {
    const bus = new LocalBus();
    const cache = new AuthCache(60_000, handClock());
    await cache.listen(bus);
    const generation = cache.generation; // the lookup starts and reads the key as live...
    await bus.publish(KEY_CHANGED_CHANNEL, "7"); // ...the key is revoked meanwhile...
    cache.set("hash", auth, null, generation); // ...and its stale result must not be cached.
    expect(cache.get("hash")).toBeUndefined();
  });

  it("honours the key's expiry and its own time to live", async () => {
    const clock = handClock();
    const cache = new AuthCache(1000, clock);
    await cache.listen(new LocalBus());
    cache.set("expiring", auth, "2026-11-21T10:00:00.500Z", cache.generation);
    expect(cache.get("expiring")).toEqual(auth);
    clock.advance(500);
    expect(cache.get("expiring")).toBeUndefined();
    cache.set("short", auth, null, cache.generation);
    clock.advance(1000);
    expect(cache.get("short")).toEqual(auth);
    clock.advance(1);
    expect(cache.get("short")).toBeUndefined();
  });

  it("drops every entry when another process commits to the store", async () => {
    let version = 1;
    const cache = new AuthCache(60_000, handClock(), () => version);
    await cache.listen(new LocalBus());
    cache.set("hash", auth, null, cache.generation);
    expect(cache.get("hash")).toEqual(auth);
    version = 2; // e.g. `cumulo keys revoke` committed from its own process
    expect(cache.get("hash")).toBeUndefined();
  });

  it("does not keep a lookup during which another process committed", async () => {
    let version = 1;
    const cache = new AuthCache(60_000, handClock(), () => version);
    await cache.listen(new LocalBus());
    expect(cache.get("hash")).toBeUndefined(); // a miss: the lookup starts...
    const generation = cache.generation;
    version = 2; // ...the key is revoked by another process after the lookup read it...
    cache.set("hash", auth, null, generation);
    expect(cache.get("hash")).toBeUndefined(); // ...and the next use checks the store again.
  });

  it("answers another node's key change only once it listens (not counted before, on PostgreSQL)", async () => {
    // The store's listening connection, played: the test sends what PostgreSQL would deliver.
    let handlers: ListenHandlers | undefined;
    const sent: string[] = [];
    const listener = {
      notifyOthers: async (payload: string) => {
        sent.push(payload);
        return 0;
      },
    } as unknown as PgListener;
    const cache = new AuthCache(60_000, handClock());
    const started = cache.listen(new LocalBus(), {
      listen: async (_channel, given) => {
        handlers = given;
        return listener;
      },
      onLost: () => {},
    });
    await started;
    const change = (id: string) => handlers?.onNotification(JSON.stringify({ changed: id }));

    change("before");
    await Promise.resolve();
    expect(sent).toEqual([]);

    handlers?.onListening();
    change("after");
    await waitUntil(() => sent.length > 0, 1000, "the acknowledgement");
    expect(JSON.parse(sent[0] ?? "")).toMatchObject({ heard: "after" });
  });
});

describe("auth cache on a running server", () => {
  let t: TestApp;
  let env: Record<string, string | undefined>;

  beforeAll(async () => {
    // A stopped clock: a cached key does not age out of the cache while the slow CLI runs.
    const started = new Date();
    t = await startTestApp({}, { clock: { now: () => new Date(started) } });
    env = { CUMULO_DATA_DIR: t.store.dataDir, DATABASE_URL: t.store.databaseUrl };
  });
  afterAll(() => t.close());

  it("refuses a key on the very next request after the CLI revoked it from its own process", async () => {
    const org = JSON.parse((await runCli(["orgs", "create", "--name", "Cached"], env)).stdout);
    const key = JSON.parse(
      (await runCli(["keys", "create", "--org", org.organization_id, "--name", "hot"], env)).stdout,
    );
    // Used repeatedly, so a cache (SQLite) holds it when the revocation lands.
    for (let i = 0; i < 3; i++) {
      expect((await t.request("GET", "/v1/media/libraries?limit=20", { key: key.api_key })).status).toBe(200);
    }
    expect((await runCli(["keys", "revoke", String(key.id)], env)).code).toBe(0);
    expect((await t.request("GET", "/v1/media/libraries?limit=20", { key: key.api_key })).status).toBe(401);
    // Three CLI processes: slow to start on a loaded machine.
  }, 90_000);

  it("refuses a cloud token on the very next request after it was deleted through the API", async () => {
    const created = await t.cloud("POST", "/v1/user-resource/token", {
      form: { description: "hot", restricted: "false" },
    });
    expect(created.status).toBe(200);
    const [token] = created.body as { id: number; token: string }[];
    for (let i = 0; i < 3; i++) {
      expect((await t.cloud("GET", "/v1/user-resource/token/list", { key: token?.token })).status).toBe(200);
    }
    const deleted = await t.cloud("DELETE", "/v1/user-resource/token", { json: { token_id: token?.id } });
    expect(deleted.status).toBeLessThan(300);
    expect((await t.cloud("GET", "/v1/user-resource/token/list", { key: token?.token })).status).toBe(401);
  });
});

describe.runIf(testStoreKind() === "postgres")("auth cache on PostgreSQL without Redis", () => {
  let t: TestApp;
  let database: string;
  /** On the server's maintenance database: can stop connections to the test database. */
  let admin: pg.Client;
  /** On the test database, as any writer (another process, an operator's SQL). */
  let writer: pg.Client;
  /** On the test database, with triggers off: its revocations are not announced to anyone. */
  let unannounced: pg.Client;
  const listener = `cumulo listener ${KEY_CHANGES_CHANNEL}`;

  beforeAll(async () => {
    // A stopped clock: an entry never ages out, so only a dropped or unused cache refuses a revoked key.
    const started = new Date();
    t = await startTestApp({}, { clock: { now: () => new Date(started) } });
    database = new URL(t.store.databaseUrl ?? "").pathname.slice(1);
    admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    writer = new pg.Client({ connectionString: t.store.databaseUrl });
    unannounced = new pg.Client({ connectionString: t.store.databaseUrl });
    await Promise.all([admin.connect(), writer.connect(), unannounced.connect()]);
    await unannounced.query("set session_replication_role = replica");
  });
  afterAll(async () => {
    await admin.query(`alter database ${database} allow_connections true`);
    await Promise.all([admin.end(), writer.end(), unannounced.end()]);
    await t.close();
  });

  const status = async (key: string) =>
    (await t.request("GET", "/v1/media/libraries?limit=20", { key })).status;
  const revoke = (client: pg.Client, key: string) =>
    client.query("update api_keys set revoked_at = now() where key_hash = $1", [hashSecret(key)]);
  const listening = async () =>
    (
      await admin.query(
        // The listener takes its name once its LISTEN is in effect.
        "select 1 from pg_stat_activity where datname = $1 and application_name = $2 and state = 'idle'",
        [database, listener],
      )
    ).rowCount === 1;

  // PostgreSQL sends the notification as the revoking transaction commits, beside the answer to its
  // client: this process can receive that answer (and serve a request) a moment before it. With the
  // clock stopped, only the notification can end the 200s here.
  it("drops a key revoked by any writer of the store when the notification arrives", async () => {
    const { key } = await t.createOrganization("announced");
    expect(await status(key)).toBe(200);
    await revoke(writer, key);
    await waitUntil(async () => (await status(key)) === 401, 5000, "the revocation to be heard");
  });

  it("serves nothing from the cache while its listening connection is down", async () => {
    const first = (await t.createOrganization("first")).key;
    const second = (await t.createOrganization("second")).key;
    expect(await status(first)).toBe(200);
    // The cache is on: a revocation that bypasses the trigger is not seen.
    await revoke(unannounced, first);
    expect(await status(first)).toBe(200);

    // The listening connection is killed and cannot come back.
    await admin.query(`alter database ${database} allow_connections false`);
    await admin.query(
      "select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and application_name = $2",
      [database, listener],
    );
    await waitUntil(async () => (await status(first)) === 401, 5000, "the cache to be dropped");
    // Off, not only emptied: a key checked now is not kept either.
    expect(await status(second)).toBe(200);
    await revoke(unannounced, second);
    expect(await status(second)).toBe(401);

    // Listening again, the cache serves and hears revocations again.
    await admin.query(`alter database ${database} allow_connections true`);
    await waitUntil(listening, 10_000, "the listener to reconnect");
    const third = (await t.createOrganization("third")).key;
    expect(await status(third)).toBe(200);
    await revoke(unannounced, third);
    expect(await status(third)).toBe(200);
    const fourth = (await t.createOrganization("fourth")).key;
    expect(await status(fourth)).toBe(200);
    await revoke(writer, fourth);
    await waitUntil(async () => (await status(fourth)) === 401, 5000, "the revocation to be heard");
  });
});

// The CLI administers the store CUMULO_DATA_DIR / DATABASE_URL name (CONTRACT.md section 2): run with
// those alone, it cannot tell the nodes through their Redis, and the store's own notification must do.
describe.runIf(testStoreKind() === "postgres" && process.env.TEST_REDIS_URL)(
  "auth cache on PostgreSQL with Redis",
  () => {
    let t: TestApp;
    let writer: pg.Client;

    beforeAll(async () => {
      // A stopped clock: a cached key never ages out, so only a heard revocation refuses it.
      const started = new Date();
      t = await startTestApp(
        { REDIS_URL: process.env.TEST_REDIS_URL ?? "" },
        { clock: { now: () => new Date(started) } },
      );
      writer = new pg.Client({ connectionString: t.store.databaseUrl });
      await writer.connect();
    });
    afterAll(async () => {
      await writer.end();
      await t.close();
    });

    const status = async (key: string) =>
      (await t.request("GET", "/v1/media/libraries?limit=20", { key })).status;

    it("refuses a key on the very next request after a CLI without REDIS_URL revoked it", async () => {
      const env = {
        CUMULO_DATA_DIR: t.store.dataDir,
        DATABASE_URL: t.store.databaseUrl,
        REDIS_URL: undefined,
      };
      const org = JSON.parse((await runCli(["orgs", "create", "--name", "Cached"], env)).stdout);
      const key = JSON.parse(
        (await runCli(["keys", "create", "--org", org.organization_id, "--name", "hot"], env)).stdout,
      );
      for (let i = 0; i < 3; i++) expect(await status(key.api_key)).toBe(200);
      expect((await runCli(["keys", "revoke", String(key.id)], env)).code).toBe(0);
      expect(await status(key.api_key)).toBe(401);
    }, 90_000);

    it("drops a key an operator's SQL revoked when the store's notification arrives", async () => {
      const { key } = await t.createOrganization("announced");
      expect(await status(key)).toBe(200);
      await writer.query("update api_keys set revoked_at = now() where key_hash = $1", [hashSecret(key)]);
      await waitUntil(async () => (await status(key)) === 401, 5000, "the revocation to be heard");
    });
  },
);
