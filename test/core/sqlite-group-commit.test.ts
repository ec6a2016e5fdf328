import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, readlinkSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import SqliteDatabase from "better-sqlite3";
import { sql } from "kysely";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { openStore, type Store } from "../../src/store/database.ts";
import { type Executor, isUniqueViolation } from "../../src/store/transactions.ts";
import { runCli } from "../support/cli.ts";
import {
  createTestStore,
  openSqliteTestStore,
  type SqliteTestStore,
  testStoreKind,
  withNoRoomForNewPages,
} from "../support/store.ts";
import { mountTmpfs, NO_TMPFS, unmountTmpfs } from "../support/tmpfs.ts";

// Group commit exists on SQLite only (src/store/sqlite-group-commit.ts).
describe.skipIf(testStoreKind() !== "sqlite")("SQLite group commit", () => {
  let testStore: SqliteTestStore;
  let store: Store;
  /** Another connection, standing for another process: it sees only what was committed. */
  let other: SqliteDatabase.Database;

  beforeAll(async () => {
    testStore = await openSqliteTestStore();
    store = testStore.store;
    other = new SqliteDatabase(join(testStore.dataDir, "cumulo.sqlite"));
  });

  afterAll(async () => {
    other.close();
    await testStore.close();
  });

  const now = new Date().toISOString();
  const organization = (name: string, id: string = randomUUID()) => ({
    id,
    name,
    created_at: now,
    updated_at: now,
  });
  const insertAlone = (name: string, id?: string) =>
    store.db.insertInto("organizations").values(organization(name, id)).execute();
  const insertInTransaction = (name: string, fail = false) =>
    store.db.transaction().execute(async (trx) => {
      await trx.insertInto("organizations").values(organization(name)).execute();
      if (fail) throw new Error(`${name} gives up`);
    });
  const committedNames = (prefix: string): string[] =>
    (
      other.prepare("select name from organizations where name like ? order by name").all(`${prefix}%`) as {
        name: string;
      }[]
    ).map((row) => row.name);

  /** Counts the COMMIT statements SQLite runs meanwhile (every connection of this process). */
  const statementPrototype = Object.getPrototypeOf(new SqliteDatabase(":memory:").prepare("select 1")) as {
    run: (this: { source: string }, ...parameters: unknown[]) => unknown;
  };
  const run = statementPrototype.run;
  let commits = 0;
  const countCommits = () => {
    commits = 0;
    statementPrototype.run = function (this: { source: string }, ...parameters: unknown[]) {
      if (/^\s*commit\s*$/i.test(this.source)) commits++;
      return run.apply(this, parameters);
    };
  };
  // A group open for more than a few milliseconds is committed before the next lease joins it. The
  // group's clock is held still, so that writes meant to meet in one group do so however loaded the
  // machine is (a test process descheduled between two of them closed the group early in CI).
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["performance"] });
  });
  afterEach(() => {
    vi.useRealTimers();
    statementPrototype.run = run;
  });

  it("commits writes that meet at the connection together, each told done only once committed", async () => {
    countCommits();
    const names = Array.from({ length: 40 }, (_, index) => `met ${String(index).padStart(2, "0")}`);
    const seenWhenDone: boolean[] = [];
    await Promise.all(
      names.map(async (name, index) => {
        await (index % 2 === 0 ? insertAlone(name) : insertInTransaction(name));
        seenWhenDone.push(committedNames(name).length === 1);
      }),
    );
    expect(seenWhenDone).toEqual(names.map(() => true));
    expect(committedNames("met ")).toEqual(names);
    // Forty writes started in one turn of the event loop: one or a few commits, not forty.
    expect(commits).toBeGreaterThan(0);
    expect(commits).toBeLessThan(5);

    // One after another, each waits for its own commit.
    countCommits();
    for (const name of ["alone 1", "alone 2", "alone 3"]) {
      await insertInTransaction(name);
      expect(committedNames(name)).toEqual([name]);
    }
    expect(commits).toBe(3);
  });

  it("commits a group before a 65th write joins it", async () => {
    // Writes since the last commit, counted as SQLite runs them.
    let sinceCommit = 0;
    let largestGroup = 0;
    commits = 0;
    statementPrototype.run = function (this: { source: string }, ...parameters: unknown[]) {
      if (/^\s*commit\s*$/i.test(this.source)) {
        commits++;
        sinceCommit = 0;
      } else if (/^\s*insert into "organizations"/i.test(this.source)) {
        largestGroup = Math.max(largestGroup, ++sinceCommit);
      }
      return run.apply(this, parameters);
    };
    const names = Array.from({ length: 200 }, (_, index) => `many ${String(index).padStart(3, "0")}`);
    await Promise.all(names.map((name) => insertAlone(name)));
    expect(committedNames("many ")).toEqual(names);
    expect(largestGroup).toBeLessThanOrEqual(64);
    expect(commits).toBeGreaterThanOrEqual(4);
  });

  it("spills a large grouped transaction's undo record to a temporary file, not to memory, and undoes it from there", async () => {
    // A transaction in a group is a savepoint: SQLite keeps the pages it changes as they were, to
    // undo it alone, in memory up to 64 KiB and then in a temporary file. Kept in memory whatever
    // their size (`temp_store = MEMORY`), a library's deletion held 630 MB (docs/performance.md,
    // session 56).
    const names = Array.from({ length: 120 }, (_, index) => `wide ${String(index).padStart(3, "0")}`);
    for (const name of names) await insertAlone(`${name} ${"x".repeat(2000)}`);
    const temporaryFiles = () =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return /etilqs_/.test(readlinkSync(`/proc/self/fd/${fd}`));
        } catch {
          return false;
        }
      });
    const wideChange = (executor: Executor, from: string, to: string) =>
      executor
        .updateTable("organizations")
        .set({ name: sql<string>`replace(name, ${from}, ${to})` })
        .where("name", "like", "wide %")
        .execute();
    const openMeanwhile = await store.db.transaction().execute(async (trx) => {
      await wideChange(trx, "x", "y");
      return temporaryFiles();
    });
    expect(openMeanwhile).toHaveLength(1);
    expect(temporaryFiles()).toEqual([]);
    expect(committedNames("wide ").map((name) => name.slice(0, 10))).toEqual(
      names.map((name) => `${name} y`),
    );

    // A large transaction that fails leaves its pages as they were, and the one grouped with it is kept.
    const outcomes = await Promise.allSettled([
      store.db.transaction().execute(async (trx) => {
        await wideChange(trx, "y", "z");
        throw new Error("the wide change gives up");
      }),
      insertInTransaction("beside the wide change"),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(["rejected", "fulfilled"]);
    expect(committedNames("wide ").map((name) => name.slice(0, 10))).toEqual(
      names.map((name) => `${name} y`),
    );
    expect(committedNames("beside the wide change")).toEqual(["beside the wide change"]);
  });

  it("keeps the others when one transaction or one statement of a group fails", async () => {
    const taken = randomUUID();
    await insertAlone("kept taken", taken);
    const outcomes = await Promise.allSettled([
      insertInTransaction("kept a"),
      insertInTransaction("kept gives up", true),
      insertAlone("kept b"),
      insertAlone("kept duplicate", taken),
      insertInTransaction("kept c"),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual([
      "fulfilled",
      "rejected",
      "fulfilled",
      "rejected",
      "fulfilled",
    ]);
    expect(isUniqueViolation((outcomes[3] as PromiseRejectedResult).reason)).toBe(true);
    expect(committedNames("kept ")).toEqual(["kept a", "kept b", "kept c", "kept taken"]);
  });

  it("answers a read that saw a group's writes only once they are committed", async () => {
    const id = randomUUID();
    const written = insertInTransaction("read after").then(() => "written");
    const read = store.db
      .selectFrom("organizations")
      .select("name")
      .where("name", "=", "read after")
      .execute()
      .then((rows) => ({ rows, committed: committedNames("read after") }));
    const [first, answer] = await Promise.all([written, read]);
    expect(first).toBe("written");
    expect(answer.rows).toEqual([{ name: "read after" }]);
    expect(answer.committed).toEqual(["read after"]);
    await insertAlone("read after alone", id);
    expect(committedNames("read after alone")).toEqual(["read after alone"]);
  });

  it("fails every write of a group that SQLite rolled back by itself (a full disk)", async () => {
    // Room for small rows in pages already there, none for a large one.
    await withNoRoomForNewPages(store.db, async () => {
      const outcomes = await Promise.allSettled([
        insertInTransaction("lost small"),
        insertAlone("lost alone"),
        insertInTransaction("x".repeat(200_000)),
        // After the loss: a group of its own.
        insertAlone("written after the loss"),
      ]);
      expect(outcomes.map((outcome) => outcome.status)).toEqual([
        "rejected",
        "rejected",
        "rejected",
        "fulfilled",
      ]);
      for (const outcome of outcomes.slice(0, 3)) {
        expect(String((outcome as PromiseRejectedResult).reason)).toContain("database or disk is full");
      }
    });
    expect(committedNames("lost ")).toEqual([]);
    expect(committedNames("written after the loss")).toEqual(["written after the loss"]);
    await insertInTransaction("after the full disk");
    expect(committedNames("after the full disk")).toEqual(["after the full disk"]);
  });

  it("runs a statement that needs no transaction after the group's commit", async () => {
    const written = insertInTransaction("before the pragma");
    // `foreign_keys` is silently ignored inside a transaction.
    const switchedOff = store.db.connection().execute(async (connection) => {
      await sql`pragma foreign_keys = off`.execute(connection);
      const { rows } = await sql<{ foreign_keys: number }>`pragma foreign_keys`.execute(connection);
      await sql`pragma foreign_keys = on`.execute(connection);
      return rows[0]?.foreign_keys;
    });
    expect(await switchedOff).toBe(0);
    await written;
    expect(committedNames("before the pragma")).toEqual(["before the pragma"]);
  });

  it("lets another process write while the store's writes are grouped", async () => {
    // Groups under endless load end as they would in production: on their age too.
    vi.useRealTimers();
    let writing = true;
    const load = (async () => {
      let written = 0;
      while (writing) {
        await Promise.all(Array.from({ length: 8 }, () => insertAlone(`load ${written++}`)));
        // As requests arrive: from the network, each in a turn of the event loop of its own.
        await new Promise((resolve) => setImmediate(resolve));
      }
      return written;
    })();
    try {
      const created = await runCli(["orgs", "create", "--name", "From the CLI under load"], {
        CUMULO_DATA_DIR: testStore.dataDir,
        DATABASE_URL: undefined,
      });
      expect(created.stderr).toBe("");
      expect(created.code).toBe(0);
    } finally {
      writing = false;
    }
    expect(await load).toBeGreaterThan(0);
    expect(committedNames("From the CLI under load")).toEqual(["From the CLI under load"]);
  }, 60_000);

  it("forgets what its reads kept of a group whose commit failed (a full disk)", async (context) => {
    const root = mkdtempSync(join(tmpdir(), "cumulo-group-commit-"));
    if (!mountTmpfs(root, "4m")) {
      rmSync(root, { recursive: true, force: true });
      context.skip(NO_TMPFS);
    }
    const full = openStore({ dataDir: join(root, "data"), databaseUrl: undefined });
    try {
      await full.migrate();
      const names = async () =>
        (await full.db.selectFrom("organizations").select("name").orderBy("name").execute()).length;
      expect(await names()).toBe(0);
      // Nothing left of the file system: the next commit cannot write its pages to the WAL.
      const { bavail, bsize } = statfsSync(root);
      writeFileSync(join(root, "filler"), Buffer.alloc(Number(bavail) * Number(bsize) - 1024));
      const written = full.db
        .insertInto("organizations")
        .values(organization("y".repeat(100_000)))
        .execute();
      // Read in the same group, after the insert: it saw the row, and is kept by the read cache.
      const read = names();
      const outcomes = await Promise.allSettled([written, read]);
      expect(outcomes.map((outcome) => outcome.status)).toEqual(["rejected", "rejected"]);
      expect(String((outcomes[0] as PromiseRejectedResult).reason)).toContain("database or disk is full");
      // The same read again: from the store, not from what the failed group's read kept.
      expect(await names()).toBe(0);
    } finally {
      await full.close();
      unmountTmpfs(root);
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("fails every write of a group when the store is closed while one of its transactions runs", async () => {
    const closing = await createTestStore("sqlite");
    const closed = openStore({ dataDir: closing.dataDir, databaseUrl: undefined });
    await closed.migrate();
    let entered = () => {};
    const inside = new Promise<void>((resolve) => {
      entered = resolve;
    });
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    try {
      // Started in one turn: the first write waits for the group the transaction then joins.
      const alone = closed.db.insertInto("organizations").values(organization("closed alone")).execute();
      const running = closed.db.transaction().execute(async (trx) => {
        await trx.insertInto("organizations").values(organization("closed running")).execute();
        entered();
        await gate;
        await trx.insertInto("organizations").values(organization("closed after")).execute();
      });
      await inside;
      await closed.close();
      release();
      const outcomes = await Promise.allSettled([alone, running]);
      expect(outcomes.map((outcome) => outcome.status)).toEqual(["rejected", "rejected"]);
      expect(String((outcomes[0] as PromiseRejectedResult).reason)).toContain(
        "the store was closed while a transaction was running",
      );
      const reopened = new SqliteDatabase(join(closing.dataDir, "cumulo.sqlite"));
      try {
        expect(reopened.prepare("select name from organizations where name like 'closed %'").all()).toEqual(
          [],
        );
      } finally {
        reopened.close();
      }
    } finally {
      release();
      await closing.drop();
    }
  });
});
