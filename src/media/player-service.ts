import { randomUUID } from "node:crypto";
import type { Insertable, Selectable } from "kysely";
import { nowIso } from "../clock.ts";
import type { Page } from "../http/pagination.ts";
import { writeJson } from "../store/codec.ts";
import type { MediaDeps } from "./context.ts";
import { toPlayer } from "./presenters.ts";
import type { CreatePlayerInput, Theme, UpdatePlayerInput } from "./schemas.ts";
import type { LibraryTable, PlayerTable } from "./tables.ts";

type PlayerRow = Selectable<PlayerTable>;

export const DEFAULT_THEME: Theme = {
  primary_color: "#3b82f6",
  background_color: "#000000",
  text_color: "#ffffff",
  controls: ["play", "progress", "current-time", "mute", "volume", "captions", "settings", "fullscreen"],
  autoplay: false,
  loop: false,
};

/**
 * Players of a library. Exactly one is the default once any exists: the store refuses a second
 * default (partial unique index) and each change runs with the library row locked.
 */
export class PlayerService {
  constructor(private readonly deps: MediaDeps) {}

  find(libraryId: string, id: string): Promise<PlayerRow | undefined> {
    return this.deps.players.find(libraryId, id);
  }

  list(libraryId: string, page: Page) {
    return this.deps.players.list(libraryId, page);
  }

  /** The first player of a library becomes its default. */
  async create(library: Selectable<LibraryTable>, input: CreatePlayerInput): Promise<PlayerRow | undefined> {
    const { db, libraries, players, clock } = this.deps;
    return db.transaction().execute(async (trx) => {
      if (!(await libraries.lockLibrary(trx, library.organization_id, library.id))) return undefined;
      const now = nowIso(clock);
      const row = {
        id: randomUUID(),
        organization_id: library.organization_id,
        library_id: library.id,
        name: input.name,
        theme: writeJson({ ...DEFAULT_THEME, ...input.theme }) as string,
        is_default: (await players.count(trx, library.id)) === 0,
        created_at: now,
        updated_at: now,
      } satisfies Insertable<PlayerTable>;
      await players.insert(trx, row);
      return row as PlayerRow;
    });
  }

  /** Renames or restyles; given theme fields replace the stored ones, the others are kept. */
  async update(libraryId: string, id: string, input: UpdatePlayerInput): Promise<PlayerRow | undefined> {
    const { db, players, clock } = this.deps;
    return db.transaction().execute(async (trx) => {
      const player = await players.find(libraryId, id, trx);
      if (!player) return undefined;
      const changes = {
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.theme ? { theme: writeJson({ ...toPlayer(player).theme, ...input.theme }) as string } : {}),
        updated_at: nowIso(clock),
      };
      await players.update(trx, id, changes);
      return { ...player, ...changes };
    });
  }

  async markAsDefault(library: Selectable<LibraryTable>, id: string): Promise<boolean> {
    const { db, libraries, players, clock } = this.deps;
    return db.transaction().execute(async (trx) => {
      if (!(await libraries.lockLibrary(trx, library.organization_id, library.id))) return false;
      const player = await players.find(library.id, id, trx);
      if (!player) return false;
      const now = nowIso(clock);
      await players.clearDefault(trx, library.id, now);
      await players.update(trx, id, { is_default: true, updated_at: now });
      return true;
    });
  }

  /** Deleting the default leaves the library without one until another is marked. */
  async delete(library: Selectable<LibraryTable>, id: string): Promise<boolean> {
    const { db, libraries, players } = this.deps;
    return db.transaction().execute(async (trx) => {
      if (!(await libraries.lockLibrary(trx, library.organization_id, library.id))) return false;
      const player = await players.find(library.id, id, trx);
      if (!player) return false;
      await players.delete(trx, id);
      return true;
    });
  }
}
