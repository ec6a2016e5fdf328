import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { openStore } from "../../src/store/database.ts";
import { onAdminDatabase, SQLITE_FILE, type TestStoreKind, testDatabaseUrl } from "./store.ts";

/**
 * Global set-up of each project: migrates one store of the project's kind, which every test app's
 * store then starts as a copy of (`createMigratedTestStore`), and removes it after
 * the run. Each test still gets a SQLite file or a PostgreSQL database of its own.
 */
export async function setup(project: TestProject) {
  const kind: TestStoreKind = project.config.env.CUMULO_TEST_STORE === "postgres" ? "postgres" : "sqlite";
  const dataDir = mkdtempSync(join(tmpdir(), "cumulo-template-"));
  const removeDataDir = () => rmSync(dataDir, { recursive: true, force: true });
  if (kind === "sqlite") {
    await migrate(dataDir, undefined);
    const source = join(dataDir, SQLITE_FILE);
    // Closing the last connection checkpoints the WAL into the file and deletes it: the file is whole.
    if (existsSync(`${source}-wal`)) throw new Error(`the template store left its WAL behind: ${source}-wal`);
    project.provide("storeTemplate", { kind, source });
    return removeDataDir;
  }
  // A name of its own: other runs may share the server, each with its own template.
  const name = `cumulo_template_${randomBytes(6).toString("hex")}`;
  await onAdminDatabase(`CREATE DATABASE ${name}`);
  try {
    // Closed before any copy: PostgreSQL copies no database that has sessions.
    await migrate(dataDir, testDatabaseUrl(name));
  } catch (error) {
    await onAdminDatabase(`DROP DATABASE ${name}`);
    throw error;
  } finally {
    removeDataDir();
  }
  project.provide("storeTemplate", { kind, source: name });
  return () => onAdminDatabase(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}

async function migrate(dataDir: string, databaseUrl: string | undefined) {
  const store = openStore({ dataDir, databaseUrl });
  try {
    await store.migrate();
  } finally {
    await store.close();
  }
}
