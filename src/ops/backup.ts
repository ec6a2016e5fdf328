import { constants } from "node:fs";
import {
  access,
  copyFile,
  cp,
  lstat,
  readdir,
  readFile,
  realpath,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";
import SqliteDatabase from "better-sqlite3";
import type { Config } from "../config.ts";
import { makeDirectories } from "../directories.ts";
import { SECRET_KEY_FILE } from "../secret-box.ts";
import { allMigrations } from "../store/migrations/index.ts";
import { API_VERSION } from "../version.ts";

const DATABASE_FILE = "cumulo.sqlite";
const BLOBS_DIR = "blobs";
const MANIFEST_FILE = "manifest.json";
/** Uploads in progress; never named by a committed row. */
const BLOB_TEMP_DIR = ".tmp";
/** The most pages better-sqlite3 lets one backup step copy. */
const ALL_PAGES = 0x7fffffff;

export interface BackupManifest {
  format: 1;
  cumulo_version: string;
  created_at: string;
  migrations: string[];
  /** false when the key comes from CUMULO_SECRET_KEY, which the operator keeps themselves. */
  secret_key_file: boolean;
  /**
   * Where the media files are: copied into the backup (local store), or left in the S3 bucket that
   * every node shares, which the operator protects with the bucket's own versioning or replication.
   * Absent in backups taken before the S3 store existed (they always include the blobs).
   */
  blobs?: { store: "local"; included: true } | { store: "s3"; bucket: string; included: false };
}

export type BackupOutcome =
  | { outcome: "backed_up"; manifest: BackupManifest }
  | { outcome: "postgres" }
  | { outcome: "target_not_empty" }
  | { outcome: "target_in_data_dir" }
  | { outcome: "no_database" }
  /** The store could not be opened (the account may not read it); nothing is left in the target. */
  | { outcome: "store_unreadable"; path: string; reason: string }
  /** A newer Cumulo migrated the store: its backup is that version's to take; nothing is left. */
  | { outcome: "newer_store"; migrations: string[] };

export type RestoreOutcome =
  | { outcome: "restored"; manifest: BackupManifest }
  | { outcome: "postgres" }
  | { outcome: "data_dir_not_empty" }
  | { outcome: "not_a_backup" }
  /** Taken from a store that a newer Cumulo migrated (migrations this one does not know). */
  | { outcome: "newer_version"; migrations: string[]; version: string }
  /** A file of the backup is cut short or missing; nothing was written. */
  | { outcome: "damaged"; reason: string };

/** Whether `path` is an empty directory or absent; a file there is not, nor a link to nothing. */
async function isEmptyDir(path: string): Promise<boolean> {
  try {
    return (await readdir(path)).length === 0;
  } catch (error) {
    const { code } = error as NodeJS.ErrnoException;
    if (code === "ENOENT") {
      // Nothing to read there; but a link that points nowhere is something there.
      const linkToNothing = await lstat(path).then(
        () => true,
        () => false,
      );
      return !linkToNothing;
    }
    if (code === "ENOTDIR") return false;
    throw error;
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw error;
  }
}

/** Where a path is on disk: its nearest existing ancestor with links resolved, and the rest as given. */
async function physicalPath(path: string): Promise<string> {
  const absolute = resolve(path);
  const rest: string[] = [];
  let existing = absolute;
  for (;;) {
    try {
      return join(await realpath(existing), ...rest.reverse());
    } catch (error) {
      const parent = dirname(existing);
      if ((error as NodeJS.ErrnoException).code !== "ENOENT" || parent === existing) return absolute;
      rest.push(basename(existing));
      existing = parent;
    }
  }
}

/**
 * An online, consistent backup of a SQLite node. Order matters: the database snapshot comes first,
 * then the blobs. A blob is written (renamed into place) before the row naming it commits and is
 * never rewritten under the same key, so every blob a snapshotted row names is already on disk when
 * the copy starts. The manifest is written last: a directory without one is an unfinished backup.
 * With the S3 blob store the blobs stay in the bucket; the manifest names it.
 */
export async function backup(config: Config, target: string): Promise<BackupOutcome> {
  if (config.databaseUrl) return { outcome: "postgres" };
  // Inside the data dir the copy would copy itself (the blobs), or end up in a later backup; the
  // paths are compared as the disk has them, so a link into the data dir is inside it too.
  const fromDataDir = relative(await physicalPath(config.dataDir), await physicalPath(target));
  if (!fromDataDir.startsWith("..") && !isAbsolute(fromDataDir)) return { outcome: "target_in_data_dir" };
  if (!(await isEmptyDir(target))) return { outcome: "target_not_empty" };
  const source = join(config.dataDir, DATABASE_FILE);
  try {
    if (!(await exists(source))) return { outcome: "no_database" };
    // SQLite says only "unable to open database file"; the file system names the cause (EACCES).
    await access(source, constants.R_OK | constants.W_OK);
  } catch (error) {
    return { outcome: "store_unreadable", path: source, reason: (error as Error).message };
  }
  const made = makeDirectories(target);
  try {
    return await copyStore(config, source, target);
  } catch (error) {
    // Nothing half-written is left where the next try must find an empty directory (QA of 6 December),
    // nor a parent the backup made for it.
    if (made !== undefined) {
      await rm(made, { recursive: true, force: true });
    } else {
      for (const name of await readdir(target))
        await rm(join(target, name), { recursive: true, force: true });
    }
    if (error instanceof StoreUnreadable) {
      return { outcome: "store_unreadable", path: source, reason: error.message };
    }
    if (error instanceof NewerStore) return { outcome: "newer_store", migrations: error.migrations };
    throw error;
  }
}

class StoreUnreadable extends Error {}

class NewerStore extends Error {
  constructor(readonly migrations: string[]) {
    super(`migrations this version does not know: ${migrations.join(", ")}`);
  }
}

/** The migrations of `ran` that this version does not have: a newer Cumulo's. */
function unknownOf(ran: readonly string[]): string[] {
  const known = allMigrations("sqlite");
  return ran.filter((name) => !(name in known));
}

async function copyStore(config: Config, source: string, target: string): Promise<BackupOutcome> {
  let live: SqliteDatabase.Database;
  try {
    live = new SqliteDatabase(source, { fileMustExist: true });
  } catch (error) {
    throw new StoreUnreadable(error instanceof Error ? error.message : String(error));
  }
  try {
    // A consistent snapshot while the server keeps writing, in one step: SQLite starts a backup
    // made in steps over whenever another connection commits between two of them, so on a store
    // larger than a few commits' interval (edge flushes every 2 s, job heartbeats) it never ended.
    // One step holds a read snapshot, which in WAL mode keeps no writer waiting.
    await live.backup(join(target, DATABASE_FILE), { progress: () => ALL_PAGES });
  } finally {
    live.close();
  }
  const migrations = readMigrations(join(target, DATABASE_FILE));
  // Its manifest would name this version, whose restore would take it for its own.
  const unknown = unknownOf(migrations);
  if (unknown.length > 0) throw new NewerStore(unknown);

  const blobs = join(config.dataDir, BLOBS_DIR);
  const { blobStore } = config;
  if (blobStore.kind === "local") {
    // Made even when the data dir has no media yet: a restore refuses a backup whose store holds
    // videos and that has no media folder.
    makeDirectories(join(target, BLOBS_DIR));
    if (await exists(blobs)) {
      await cp(blobs, join(target, BLOBS_DIR), {
        recursive: true,
        filter: (path) => path !== join(blobs, BLOB_TEMP_DIR),
      });
    }
  }
  const keyFile = join(config.dataDir, SECRET_KEY_FILE);
  const hasKeyFile = await exists(keyFile);
  if (hasKeyFile) await copyFile(keyFile, join(target, SECRET_KEY_FILE));

  const manifest: BackupManifest = {
    format: 1,
    cumulo_version: API_VERSION,
    created_at: new Date().toISOString(),
    migrations,
    secret_key_file: hasKeyFile,
    blobs:
      blobStore.kind === "s3"
        ? { store: "s3", bucket: blobStore.bucket, included: false }
        : { store: "local", included: true },
  };
  await writeFile(join(target, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
  return { outcome: "backed_up", manifest };
}

/**
 * The migrations a copied store has run. The copy is left in rollback-journal mode, one file that
 * needs no `-wal` or `-shm` beside it (a server opening it restored turns WAL on again).
 */
function readMigrations(file: string): string[] {
  const copy = new SqliteDatabase(file, { fileMustExist: true });
  try {
    copy.pragma("journal_mode = DELETE");
    return copy.prepare("SELECT name FROM kysely_migration ORDER BY name").pluck().all() as string[];
  } finally {
    copy.close();
  }
}

/**
 * What is wrong with a backup's files, if anything: the key file its manifest names, its store (sound,
 * and the store the manifest describes: a file cut to nothing is an empty SQLite database, which
 * `quick_check` passes and a server would start on as a new platform), and the media files.
 */
async function damaged(from: string, manifest: BackupManifest): Promise<string | undefined> {
  if (manifest.secret_key_file && !(await exists(join(from, SECRET_KEY_FILE)))) {
    return `${SECRET_KEY_FILE} is missing, though ${MANIFEST_FILE} says it was backed up`;
  }
  let holdsVideos: boolean;
  try {
    const copy = new SqliteDatabase(join(from, DATABASE_FILE), { readonly: true, fileMustExist: true });
    try {
      const problems = copy.pragma("quick_check", { simple: false }) as { quick_check: string }[];
      if (problems[0]?.quick_check !== "ok")
        throw new Error(problems.map((row) => row.quick_check).join("; "));
      const ran = copy.prepare("SELECT name FROM kysely_migration ORDER BY name").pluck().all() as string[];
      if (manifest.migrations && ran.join("\n") !== [...manifest.migrations].sort().join("\n")) {
        throw new Error(
          `its migrations are not the ${manifest.migrations.length} that ${MANIFEST_FILE} lists`,
        );
      }
      holdsVideos = copy.prepare("SELECT 1 FROM media_videos LIMIT 1").get() !== undefined;
    } finally {
      copy.close();
    }
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return `${DATABASE_FILE} is not a sound Cumulo store (${reason})`;
  }
  // Only a store with videos needs the folder (a backup taken by hand of a store without media may lack it).
  const blobsIncluded = manifest.blobs?.included ?? true;
  if (blobsIncluded && holdsVideos && !(await exists(join(from, BLOBS_DIR)))) {
    return `${BLOBS_DIR}/ is missing, though ${MANIFEST_FILE} says the media files were backed up`;
  }
  return undefined;
}

/** Brings a backup back into an empty data dir; never overwrites a store that exists. */
export async function restore(config: Config, from: string): Promise<RestoreOutcome> {
  if (config.databaseUrl) return { outcome: "postgres" };
  if (!(await exists(join(from, MANIFEST_FILE))) || !(await exists(join(from, DATABASE_FILE)))) {
    return { outcome: "not_a_backup" };
  }
  let manifest: BackupManifest;
  try {
    manifest = JSON.parse(await readFile(join(from, MANIFEST_FILE), "utf8")) as BackupManifest;
  } catch (error) {
    return { outcome: "damaged", reason: `${MANIFEST_FILE} cannot be read (${(error as Error).message})` };
  }
  if (manifest?.format !== 1) {
    return {
      outcome: "damaged",
      reason: `${MANIFEST_FILE} is not of a backup format this version reads (1)`,
    };
  }
  // A store a newer Cumulo migrated: this one would refuse to start on it after the restore.
  const unknown = unknownOf(manifest.migrations ?? []);
  if (unknown.length > 0)
    return { outcome: "newer_version", migrations: unknown, version: manifest.cumulo_version };
  if (!(await isEmptyDir(config.dataDir))) return { outcome: "data_dir_not_empty" };
  // Checked before anything is written: a restore refused halfway left a data dir that was no
  // longer empty, and a store cut short was restored, and the server then refused to start on it.
  const damage = await damaged(from, manifest);
  if (damage) return { outcome: "damaged", reason: damage };

  makeDirectories(config.dataDir);
  if (await exists(join(from, BLOBS_DIR))) {
    await cp(join(from, BLOBS_DIR), join(config.dataDir, BLOBS_DIR), { recursive: true });
  }
  if (manifest.secret_key_file) {
    await copyFile(join(from, SECRET_KEY_FILE), join(config.dataDir, SECRET_KEY_FILE));
  }
  // The database last: a data dir with a store in it is a restored one.
  await copyFile(join(from, DATABASE_FILE), join(config.dataDir, DATABASE_FILE));
  return { outcome: "restored", manifest };
}
