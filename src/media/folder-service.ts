import { randomUUID } from "node:crypto";
import { nowIso } from "../clock.ts";
import type { Page } from "../http/pagination.ts";
import type { MediaDeps } from "./context.ts";
import type { CreateFolderInput, UpdateFolderInput } from "./schemas.ts";
import type { FolderRow, LibraryRow, VideoRow } from "./tables.ts";
import type { VideoService } from "./video-service.ts";

export type FolderOutcome =
  | { outcome: "created" | "updated"; folder: FolderRow }
  | { outcome: "not_found" | "parent_not_found" | "parent_is_descendant" };

export class FolderService {
  constructor(
    private readonly deps: MediaDeps,
    private readonly videos: VideoService,
  ) {}

  find(libraryId: string, id: string): Promise<FolderRow | undefined> {
    return this.deps.folders.find(libraryId, id);
  }

  list(libraryId: string, parentId: string | undefined, page: Page) {
    return this.deps.folders.list(libraryId, parentId, page);
  }

  async create(library: LibraryRow, input: CreateFolderInput): Promise<FolderOutcome> {
    const { transact, folders, clock } = this.deps;
    return transact(async (trx): Promise<FolderOutcome> => {
      if (input.parent_id) await this.deps.libraries.lockById(trx, library.id);
      if (input.parent_id && !(await folders.find(library.id, input.parent_id, trx))) {
        return { outcome: "parent_not_found" };
      }
      const now = nowIso(clock);
      const folder: FolderRow = {
        id: randomUUID(),
        organization_id: library.organization_id,
        library_id: library.id,
        parent_id: input.parent_id ?? null,
        name: input.name,
        created_at: now,
        updated_at: now,
      };
      await folders.insert(trx, folder);
      return { outcome: "created", folder };
    });
  }

  /** Renames or moves a folder; it cannot move below itself. */
  async update(libraryId: string, id: string, input: UpdateFolderInput): Promise<FolderOutcome> {
    const { transact, folders, clock } = this.deps;
    return transact(async (trx): Promise<FolderOutcome> => {
      const folder = await folders.find(libraryId, id, trx);
      if (!folder) return { outcome: "not_found" };
      if (input.parent_id) {
        await this.deps.libraries.lockById(trx, libraryId);
        if (!(await folders.find(libraryId, input.parent_id, trx))) return { outcome: "parent_not_found" };
        const subtree = await folders.withDescendants(trx, libraryId, [id]);
        if (subtree.includes(input.parent_id)) return { outcome: "parent_is_descendant" };
      }
      const changes = {
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.parent_id !== undefined ? { parent_id: input.parent_id } : {}),
        updated_at: nowIso(clock),
      };
      // Not locked: a deletion of the folder meanwhile leaves nothing to update.
      const updated = await folders.update(trx, id, changes);
      return updated ? { outcome: "updated", folder: updated } : { outcome: "not_found" };
    });
  }

  /**
   * Deletes the folders, every folder nested in them and every video inside (with subtitles and
   * thumbnails) in one transaction. If any id is not a folder of the library nothing is deleted.
   */
  async deleteMany(
    libraryId: string,
    ids: string[],
  ): Promise<{ outcome: "deleted"; folderIds: string[] } | { outcome: "not_found" }> {
    const { transact, folders, webhooks } = this.deps;
    const requested = [...new Set(ids)];
    const result = await transact(async (trx) => {
      await this.deps.libraries.lockById(trx, libraryId);
      if ((await folders.countInLibrary(trx, libraryId, requested)) !== requested.length) return undefined;
      const subtree = await folders.withDescendants(trx, libraryId, requested);
      const videos: VideoRow[] = await this.deps.videos.inFolders(trx, subtree);
      const removal = await this.videos.removeInTransaction(trx, videos);
      await folders.deleteMany(trx, subtree);
      return { videos, removal };
    });
    if (!result) return { outcome: "not_found" };
    if (result.videos.length > 0) webhooks.notify();
    await this.deps.removals.carryOut(result.removal);
    return { outcome: "deleted", folderIds: requested };
  }
}
