import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

export type TestStoreKind = "sqlite" | "postgres";

/** Which store this test process runs against; vitest runs the suite once per store (vitest.config.ts). */
export const testStoreKind = (): TestStoreKind =>
  process.env.CUMULO_TEST_STORE === "postgres" ? "postgres" : "sqlite";

export interface TestStore {
  kind: TestStoreKind;
  dataDir: string;
  databaseUrl: string | undefined;
  /** Redis key and channel prefix of its own, so test files sharing one Redis never hear each other. */
  redisPrefix: string;
  drop(): Promise<void>;
}

function adminUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error("CUMULO_TEST_STORE=postgres needs TEST_DATABASE_URL");
  return url;
}

/** A data dir of its own and, on PostgreSQL, a database of its own, dropped afterwards. */
export async function createTestStore(kind: TestStoreKind = testStoreKind()): Promise<TestStore> {
  const dataDir = mkdtempSync(join(tmpdir(), "cumulo-test-"));
  const redisPrefix = `cumulo-test-${randomBytes(6).toString("hex")}:`;
  if (kind === "sqlite") {
    return {
      kind,
      dataDir,
      databaseUrl: undefined,
      redisPrefix,
      drop: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const name = `cumulo_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return {
    kind,
    dataDir,
    databaseUrl: url.toString(),
    redisPrefix,
    async drop() {
      const client = new pg.Client({ connectionString: adminUrl() });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
