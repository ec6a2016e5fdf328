import { randomUUID } from "node:crypto";
import { nowIso } from "../clock.ts";
import type { Page } from "../http/pagination.ts";
import { writeJson } from "../store/codec.ts";
import type { MediaDeps } from "./context.ts";
import { toPlayer } from "./presenters.ts";
import type { CreatePlayerInput, Theme, UpdatePlayerInput } from "./schemas.ts";
import type { LibraryRow, NewPlayerRow, PlayerRow } from "./tables.ts";

export type PlayerOutcome<Done extends string> =
  | { outcome: Done; player: PlayerRow }
  | { outcome: "not_found" };

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
  async create(library: LibraryRow, input: CreatePlayerInput): Promise<PlayerOutcome<"created">> {
    const { transact, libraries, players, clock } = this.deps;
    return transact(async (trx): Promise<PlayerOutcome<"created">> => {
      if (!(await libraries.lockLibrary(trx, library.organization_id, library.id)))
        return { outcome: "not_found" };
      const now = nowIso(clock);
      const row: NewPlayerRow = {
        id: randomUUID(),
        organization_id: library.organization_id,
        library_id: library.id,
        name: input.name,
        theme: writeJson({ ...DEFAULT_THEME, ...input.theme }) as string,
        is_default: (await players.count(trx, library.id)) === 0,
        created_at: now,
        updated_at: now,
      };
      await players.insert(trx, row);
      return { outcome: "created", player: row as PlayerRow };
    });
  }

  /** Renames or restyles; given theme fields replace the stored ones, the others are kept. */
  async update(libraryId: string, id: string, input: UpdatePlayerInput): Promise<PlayerOutcome<"updated">> {
    const { transact, libraries, players, clock } = this.deps;
    return transact(async (trx): Promise<PlayerOutcome<"updated">> => {
      // The theme is merged with the stored one: two changes at once must not read the same theme.
      await libraries.lockById(trx, libraryId);
      const player = await players.find(libraryId, id, trx);
      if (!player) return { outcome: "not_found" };
      const changes = {
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.theme ? { theme: writeJson({ ...toPlayer(player).theme, ...input.theme }) as string } : {}),
        updated_at: nowIso(clock),
      };
      const updated = await players.update(trx, id, changes);
      return updated ? { outcome: "updated", player: updated } : { outcome: "not_found" };
    });
  }

  async markAsDefault(library: LibraryRow, id: string): Promise<{ outcome: "marked" | "not_found" }> {
    const { transact, libraries, players, clock } = this.deps;
    return transact(async (trx) => {
      if (!(await libraries.lockLibrary(trx, library.organization_id, library.id)))
        return { outcome: "not_found" };
      const player = await players.find(library.id, id, trx);
      if (!player) return { outcome: "not_found" };
      const now = nowIso(clock);
      await players.clearDefaultBut(trx, library.id, id, now);
      await players.update(trx, id, { is_default: true, updated_at: now });
      return { outcome: "marked" };
    });
  }

  /** Deleting the default leaves the library without one until another is marked. */
  async delete(library: LibraryRow, id: string): Promise<{ outcome: "deleted" | "not_found" }> {
    const { transact, libraries, players } = this.deps;
    return transact(async (trx) => {
      if (!(await libraries.lockLibrary(trx, library.organization_id, library.id)))
        return { outcome: "not_found" };
      const player = await players.find(library.id, id, trx);
      if (!player) return { outcome: "not_found" };
      await players.delete(trx, id);
      return { outcome: "deleted" };
    });
  }
}
