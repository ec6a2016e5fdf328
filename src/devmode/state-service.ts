import { copyFile, cp, mkdir, readdir, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import pLimit from "p-limit";
import type { FileRemovals } from "../blobs/removals.ts";
import type { BlobStore } from "../blobs/store.ts";
import type { Bus } from "../bus.ts";
import type { TrafficRecorder } from "../cdn/analytics.ts";
import type { Config } from "../config.ts";
import type { BootstrapRows, IdentityService } from "../identity/service.ts";
import { libraryBlobPrefix, MEDIA_PREFIX } from "../media/urls.ts";
import type { CoreDeps, Services } from "../services.ts";
import type { DialectName } from "../store/database.ts";
import { uploadDirectory } from "../video/uploads/tus.ts";
import { type KeptRows, StateRepository } from "./state-repository.ts";

/** Snapshot names: lower-case letters, digits and `_` (they name a PostgreSQL schema and a folder). */
export const SNAPSHOT_NAME = "^[a-z0-9_]{1,40}$";

/** Snapshots refused: the node keeps its media files in an S3 bucket, which a snapshot does not copy. */
export const FILES_IN_BUCKET = "files_in_bucket";
export const FILES_IN_BUCKET_MESSAGE =
  "Snapshots copy the local blobs folder; this node keeps its media files in an S3 bucket (CUMULO_BLOB_STORE=s3)";

/** The file of a SQLite snapshot's store, in its folder. */
const SQLITE_FILE = "store.sqlite";

export interface SnapshotView {
  name: string;
  created_at: string;
}

export type ResetTarget = "bootstrap" | "empty";

/**
 * Developer mode's store operations: reset, and named snapshots of the store and the blobs. After
 * each change every node drops its caches (verified keys, edge hosts, edge cache) through the bus,
 * and the change is answered once every node has said it dropped its verified keys.
 */
export class StateService {
  /** One state change at a time: two saves of one name, or a seed beside a load, would interleave their files. */
  readonly #oneAtATime = pLimit(1);

  constructor(
    private readonly repository: StateRepository,
    private readonly dialect: DialectName,
    private readonly config: Config,
    private readonly identity: IdentityService,
    private readonly bus: Bus,
    private readonly blobs: BlobStore,
    private readonly removals: FileRemovals,
    private readonly traffic: Pick<TrafficRecorder, "announceReplacement">,
  ) {}

  get #blobDir() {
    return join(this.config.dataDir, "blobs");
  }

  /** Unfinished resumable uploads' bytes (tus), one file per upload; always on this node's disk. */
  get #uploadDir() {
    return uploadDirectory(this.config.dataDir);
  }

  #snapshotDir(name?: string) {
    const root = join(this.config.dataDir, "snapshots");
    return name === undefined ? root : join(root, name);
  }

  /**
   * Empties the store and the blobs. `bootstrap` keeps the default organization as it was created,
   * under its id: its first user, default billing account and bootstrap key (the configured one, else
   * the key it was made with; where that is gone a new one is generated and returned once). Without a
   * default organization one is made, as at first start. One transaction.
   */
  reset(to: ResetTarget): Promise<{ outcome: "reset"; generatedKey: string | undefined }> {
    return this.#oneAtATime(() => this.#reset(to));
  }

  async #reset(to: ResetTarget): Promise<{ outcome: "reset"; generatedKey: string | undefined }> {
    const bootstrapKey = this.config.bootstrapApiKey;
    await this.traffic.announceReplacement({ stage: "starting" });
    const { generatedKey } = await this.repository.empty(async (trx, deleteAllBut) => {
      if (to === "empty") {
        await deleteAllBut({});
        return {};
      }
      const kept = await this.identity.bootstrapRows(trx, bootstrapKey);
      await deleteAllBut(kept ? keptRows(kept) : {});
      return this.identity.restoreBootstrap(trx, kept, bootstrapKey);
    });
    // Every file is under `media/`, in the blob store whichever it is (a bucket, or the blobs folder).
    await this.blobs.deletePrefix(MEDIA_PREFIX);
    await rm(this.#blobDir, { recursive: true, force: true });
    await rm(this.#uploadDir, { recursive: true, force: true });
    await this.#dropCaches({});
    return { outcome: "reset", generatedKey };
  }

  /**
   * Empties one organization, leaving every other untouched: `bootstrap` keeps the organization with
   * its users, billing account and keys (the state it was created in), `empty` removes it whole.
   */
  resetOrganization(organizationId: string, to: ResetTarget): Promise<{ outcome: "reset" | "not_found" }> {
    return this.#oneAtATime(() => this.#resetOrganization(organizationId, to));
  }

  async #resetOrganization(
    organizationId: string,
    to: ResetTarget,
  ): Promise<{ outcome: "reset" | "not_found" }> {
    await this.traffic.announceReplacement({ stage: "starting", organizationId });
    // The files go as a deleted library's do: queued with the change, so a bucket that is away
    // neither fails the reset after its rows are gone nor keeps the files.
    const emptied = await this.repository.emptyOrganization(organizationId, to === "bootstrap", (trx, ids) =>
      this.removals.queue(trx, { prefixes: ids.map(libraryBlobPrefix) }),
    );
    if (!emptied) return { outcome: "not_found" };
    await this.removals.carryOut(emptied.finished);
    await this.#dropCaches({ organizationId });
    return { outcome: "reset" };
  }

  /** After the store, or one organization's part of it (`replaced`), changed under every node. */
  async #dropCaches(replaced: { organizationId?: string }): Promise<void> {
    await this.traffic.announceReplacement({ stage: "done", ...replaced });
    await this.bus.dropCaches();
    // Without Redis the bus reaches no other node; the key change's announcement does.
    await this.identity.keyChanged();
  }

  /** Snapshots copy the blobs folder: with the files in a bucket they would hold rows without files. */
  get #filesInBucket(): boolean {
    return this.config.blobStore.kind === "s3";
  }

  save(
    name: string,
  ): Promise<{ outcome: "saved"; snapshot: SnapshotView } | { outcome: typeof FILES_IN_BUCKET }> {
    return this.#oneAtATime(async () => {
      if (this.#filesInBucket) return { outcome: FILES_IN_BUCKET } as const;
      await this.#save(name);
      return { outcome: "saved", snapshot: await this.#view(name) } as const;
    });
  }

  /**
   * Written under a name no snapshot can have, then renamed: a save cut short (a crash, a full disk)
   * leaves no folder that looks like a snapshot.
   */
  async #save(name: string): Promise<void> {
    const dir = this.#snapshotDir(name);
    const partial = this.#snapshotDir(`.saving-${name}`);
    await rm(partial, { recursive: true, force: true });
    await mkdir(partial, { recursive: true });
    if (this.dialect === "sqlite") await this.repository.saveSqlite(join(partial, SQLITE_FILE));
    else await this.repository.savePostgres(name);
    await cp(this.#blobDir, join(partial, "blobs"), { recursive: true }).catch(ignoreMissing);
    // After the store: an upload's offset is its file's length, so bytes that arrived since the
    // store was copied are simply more of the upload (tus clients ask for the offset on resuming).
    await copyUploads(this.#uploadDir, join(partial, "uploads"));
    await rm(dir, { recursive: true, force: true });
    await rename(partial, dir);
  }

  load(
    name: string,
  ): Promise<{ outcome: "loaded" | "not_found" | "schema_mismatch" | typeof FILES_IN_BUCKET }> {
    return this.#oneAtATime(async () => {
      if (this.#filesInBucket) return { outcome: FILES_IN_BUCKET } as const;
      if (!(await this.#exists(name))) return { outcome: "not_found" } as const;
      return this.#load(name);
    });
  }

  async #load(name: string): Promise<{ outcome: "loaded" | "schema_mismatch" }> {
    const dir = this.#snapshotDir(name);
    await this.traffic.announceReplacement({ stage: "starting" });
    const loaded = await this.repository.load(
      this.dialect === "sqlite" ? { sqliteFile: join(dir, SQLITE_FILE) } : { postgresName: name },
    );
    if (loaded === "schema_mismatch") return { outcome: loaded };
    await rm(this.#blobDir, { recursive: true, force: true });
    await cp(join(dir, "blobs"), this.#blobDir, { recursive: true }).catch(ignoreMissing);
    await rm(this.#uploadDir, { recursive: true, force: true });
    await copyUploads(join(dir, "uploads"), this.#uploadDir);
    await this.#dropCaches({});
    return { outcome: "loaded" };
  }

  remove(name: string): Promise<{ outcome: "deleted" | "not_found" }> {
    return this.#oneAtATime(async () => {
      if (!(await this.#exists(name))) return { outcome: "not_found" } as const;
      await this.#remove(name);
      return { outcome: "deleted" } as const;
    });
  }

  async #remove(name: string): Promise<void> {
    if (this.dialect === "postgres") await this.repository.dropPostgresSnapshot(name);
    await rm(this.#snapshotDir(name), { recursive: true, force: true });
  }

  /**
   * Runs a seed with no other state change in between. `work` adds the id of each organization it
   * makes to `made`; when it answers `failed` (or throws), those organizations are removed whole, and
   * nothing else: what other clients did meanwhile stays.
   */
  withRollback<T extends { outcome: string }>(work: (made: string[]) => Promise<T>): Promise<T> {
    return this.#oneAtATime(async () => {
      const made: string[] = [];
      const takeBack = async () => {
        for (const organizationId of made) await this.#resetOrganization(organizationId, "empty");
      };
      try {
        const result = await work(made);
        if (result.outcome === "failed") await takeBack();
        return result;
      } catch (error) {
        await takeBack();
        throw error;
      }
    });
  }

  async list(): Promise<SnapshotView[]> {
    const names = await readdir(this.#snapshotDir()).catch((error: unknown) => {
      ignoreMissing(error);
      return [];
    });
    const views: SnapshotView[] = [];
    for (const name of names.sort()) if (await this.#exists(name)) views.push(await this.#view(name));
    return views;
  }

  /** A snapshot exists once its folder and its store (the SQLite file, or the PostgreSQL schema) do. */
  async #exists(name: string): Promise<boolean> {
    if (!new RegExp(SNAPSHOT_NAME).test(name)) return false;
    const stored =
      this.dialect === "sqlite" ? join(this.#snapshotDir(name), SQLITE_FILE) : this.#snapshotDir(name);
    const found = await stat(stored).then(
      () => true,
      () => false,
    );
    if (!found || this.dialect === "sqlite") return found;
    return this.repository.postgresSnapshotExists(name);
  }

  async #view(name: string): Promise<SnapshotView> {
    const info = await stat(this.#snapshotDir(name));
    return { name, created_at: info.mtime.toISOString() };
  }
}

/** The default organization's rows by table, as `StateRepository.empty` keeps them. */
const keptRows = (kept: BootstrapRows): KeptRows => ({
  organizations: [kept.organizationId],
  users: [kept.userId],
  billing_accounts: kept.billingAccountId === undefined ? [] : [kept.billingAccountId],
  api_keys: kept.keyId === undefined ? [] : [kept.keyId],
});

/** No blobs folder yet (nothing uploaded) is an empty set of blobs. */
function ignoreMissing(error: unknown): void {
  if ((error as { code?: string }).code !== "ENOENT") throw error;
}

/**
 * Copies the uploads folder's files one by one: an upload that finishes meanwhile moves its file
 * into the blobs, which must not end the whole copy (as it would `cp`'s). No folder is no uploads.
 */
async function copyUploads(from: string, to: string): Promise<void> {
  const entries = await readdir(from, { withFileTypes: true }).catch((error: unknown) => {
    ignoreMissing(error);
    return [];
  });
  await mkdir(to, { recursive: true });
  for (const entry of entries) {
    if (entry.isFile()) await copyFile(join(from, entry.name), join(to, entry.name)).catch(ignoreMissing);
  }
}

export const createStateService = (
  deps: CoreDeps,
  services: Pick<Services, "identity" | "blobs" | "removals" | "cdnTraffic">,
): StateService =>
  new StateService(
    new StateRepository(deps.store.db, deps.store.dialect),
    deps.store.dialect,
    deps.config,
    services.identity,
    deps.bus,
    services.blobs,
    services.removals,
    services.cdnTraffic,
  );
