import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { startCumulo } from "../../src/roles.ts";
import { openStore } from "../../src/store/database.ts";
import { migrationNames } from "../../src/store/migrations/index.ts";
import { exitOf, serve } from "../support/process.ts";
import { createTestStore, type TestStore } from "../support/store.ts";

describe("cumulo serve", () => {
  let store: TestStore;
  let env: Record<string, string | undefined>;
  beforeAll(async () => {
    store = await createTestStore();
    env = { CUMULO_DATA_DIR: store.dataDir, DATABASE_URL: store.databaseUrl, CUMULO_BOOTSTRAP_API_KEY: "" };
  });
  afterAll(() => store.drop());

  it("prints a generated admin key on first start only, and shuts down cleanly on SIGTERM", async () => {
    const first = await serve(env);
    const key = /(cmk_[A-Za-z0-9_-]{43})/.exec(first.output())?.[1];
    expect(key).toBeDefined();
    // CONTRACT.md section 2: the generated key is printed once, so it appears in the output once.
    expect(first.output().split(key ?? "").length - 1).toBe(1);
    // With CUMULO_EDGE_PORT=off (serve's default here) the edge runs nothing and is not named.
    expect(first.output()).toMatch(/^Cumulo ready \(roles: api, worker\)$/m);
    // The operator's record that the store was migrated (nothing said so before 6 December).
    expect(first.output()).toContain(
      `\nStore migrated: a new store, all ${migrationNames().length} migrations applied\n`,
    );
    const health = await fetch(`${first.apiUrl}/v1/livestream/health`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(await health.json()).toEqual({ status: "healthy" });
    first.child.kill("SIGTERM");
    expect(await exitOf(first.child)).toBe(0);

    expect(first.output()).not.toMatch(/warning/);

    // Listening on every interface: the links such a node builds would name 0.0.0.0.
    // And a secret key short enough to be guessed from a playback token.
    const second = await serve({
      ...env,
      CUMULO_EDGE_PORT: "0",
      HOST: "0.0.0.0",
      CUMULO_SECRET_KEY: "changeme",
      // Names no setting reads: the first was set for DATABASE_URL, and the node ran on SQLite
      // without a word (QA of session 48).
      CUMULO_DATABASE_URL: "postgres://127.0.0.1:1/elsewhere",
      CUMULO_LOG_LEVL: "debug",
    });
    expect(second.output()).toMatch(
      /^cumulo: warning: CUMULO_DATABASE_URL \(did you mean DATABASE_URL\?\), CUMULO_LOG_LEVL are set but no setting of this node reads them: a misspelled name/m,
    );
    expect(second.output()).toMatch(
      /^cumulo: warning: HOST is 0\.0\.0\.0, .* set CUMULO_EDGE_PUBLIC_URL \(playback URLs\) and CUMULO_PUBLIC_URL \(console invitation links\)/m,
    );
    expect(second.output()).toMatch(
      /^cumulo: warning: CUMULO_SECRET_KEY has 8 characters: .* 32 or more random characters/m,
    );
    expect(second.output()).not.toMatch(/cmk_/);
    expect(second.edgeUrl).toMatch(/^http:\/\//);
    expect(second.output()).toMatch(/^Cumulo ready \(roles: api, worker, edge\)$/m);
    expect(second.output()).not.toContain("Store migrated");
    const again = await fetch(`${second.apiUrl}/v1/livestream/health`, {
      headers: { "x-api-key": key ?? "" },
    });
    expect(again.status).toBe(200);
    second.child.kill("SIGINT");
    expect(await exitOf(second.child)).toBe(0);
    // Two cold starts of a server process: a time limit for a busy machine, not a speed check.
  }, 240_000);

  // The upgrade's line: a data migration (safe to run again) forgotten by hand stands for the one
  // migration a new release brings.
  it("names the migrations a start applied to a store it upgraded", async () => {
    const opened = openStore({ dataDir: store.dataDir, databaseUrl: store.databaseUrl });
    try {
      await sql`delete from kysely_migration where name = '0705-chosen-key-prefixes'`.execute(opened.db);
    } finally {
      await opened.close();
    }
    const upgraded = await serve(env);
    expect(upgraded.output()).toMatch(/^Store migrated: applied 0705-chosen-key-prefixes$/m);
    // Stopped as soon as it says it is ready: a graceful stop all the same.
    upgraded.child.kill("SIGTERM");
    expect(await exitOf(upgraded.child)).toBe(0);
  }, 120_000);

  it("refuses to start on a data dir it cannot write, whatever the store", async () => {
    // On PostgreSQL and S3 a node used to start and say it was ready, then fail every upload and
    // postpone every video: the data dir holds unfinished uploads and processing's scratch space.
    // (The bucket is never asked: the data dir is checked first.)
    const file = join(store.dataDir, "a-file");
    writeFileSync(file, "");
    const starting = startCumulo(
      loadConfig({
        CUMULO_ROLES: "worker",
        CUMULO_LOG_LEVEL: "silent",
        CUMULO_EDGE_PORT: "off",
        CUMULO_DATA_DIR: join(file, "data"),
        CUMULO_BLOB_STORE: "s3",
        CUMULO_S3_BUCKET: "never-asked",
        CUMULO_S3_ENDPOINT: "http://127.0.0.1:9",
        ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
      }),
    );
    await expect(starting).rejects.toThrow(
      `cannot write to the data dir ${join(file, "data")} (CUMULO_DATA_DIR): ENOTDIR`,
    );
  });

  it("runs only the roles it is given", async () => {
    const workerOnly = await startCumulo(
      loadConfig({
        CUMULO_ROLES: "worker",
        CUMULO_LOG_LEVEL: "silent",
        CUMULO_EDGE_PORT: "off",
        CUMULO_DATA_DIR: store.dataDir,
        ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
      }),
    );
    try {
      expect(workerOnly.apiUrl).toBeUndefined();
      expect(workerOnly.app).toBeUndefined();
    } finally {
      await workerOnly.close();
    }
  });
});
