import type { Bus } from "../bus.ts";
import type { Clock } from "../clock.ts";
import type { Store } from "../store/database.ts";
import { KEY_CHANGES_CHANNEL } from "../store/migrations/0006-identity-key-notifications.ts";
import type { PgListener } from "../store/pg-listener.ts";
import type { AuthContext } from "./service.ts";

/** Published (with the key id) after a key is revoked or changed, so every node drops what it cached. */
export const KEY_CHANGED_CHANNEL = "identity.key-changed";

/** A bound on staleness should a key-change message be lost (Redis outage); normally changes arrive at once. */
export const AUTH_CACHE_TTL_MS = 2000;

/** The store's own change notifications (PostgreSQL), and what to do when they cannot be heard. */
export interface StoreListen {
  listen: NonNullable<Store["listen"]>;
  onLost: (error?: unknown) => void;
}

interface Entry {
  auth: AuthContext;
  expiresAt: string | null;
  /** Milliseconds of the injected clock when the entry was made. */
  cachedAt: number;
}

/**
 * Verified keys, kept for a short time so a request does not need a store round trip to authenticate.
 * Any key change published on the bus clears the whole cache (changes are rare); a lookup that was in
 * flight while a change arrived is not cached (`generation`), so a revoked key never comes back.
 * Used only where every revocation reaches it: through the bus with Redis; on SQLite, where any
 * commit by another process (the CLI) moves `externalChanges` and clears the cache before its next
 * use; on PostgreSQL without Redis, where the store itself announces every key change as it commits
 * (`listen` with `storeListen`). See docs/performance.md.
 */
export class AuthCache {
  readonly #entries = new Map<string, Entry>();
  #generation = 0;
  #listening = false;
  #storeVersion: number | undefined;
  #storeListener: PgListener | undefined;

  constructor(
    private readonly ttlMs: number,
    private readonly clock: Clock,
    private readonly externalChanges?: () => number,
    private readonly maxEntries = 10_000,
  ) {
    this.#storeVersion = externalChanges?.();
  }

  /**
   * Starts serving from the cache once this node hears every key change: through the bus, or, given
   * `storeListen` (PostgreSQL without Redis), from the store itself. There every transaction that
   * changes a key notifies as it commits (a trigger, so the CLI's too), and this node serves from the
   * cache only while its listening connection is up; whatever was cached or looked up before that
   * connection was (re)established is dropped.
   */
  async listen(bus: Bus, storeListen?: StoreListen): Promise<void> {
    // Key changes sent while this node was cut off from the others are lost; a developer-mode reset too.
    bus.onReconnect(() => this.clear());
    if (!storeListen) {
      await bus.subscribe(KEY_CHANGED_CHANNEL, () => this.clear());
      this.#listening = true;
      return;
    }
    this.#storeListener = await storeListen.listen(KEY_CHANGES_CHANNEL, {
      onListening: () => {
        this.clear();
        this.#listening = true;
      },
      onNotification: () => this.clear(),
      onLost: (error) => {
        this.#listening = false;
        this.clear();
        storeListen.onLost(error);
      },
    });
  }

  /**
   * After this node committed a key change: resolves once this node has heard it from PostgreSQL
   * (at once elsewhere). The other nodes' sessions were signalled at the same moment, so the change
   * is answered after their notifications are on their way rather than beside them.
   */
  async changeHeard(): Promise<void> {
    if (this.#listening) await this.#storeListener?.caughtUp();
  }

  get generation(): number {
    return this.#generation;
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
  }

  get(keyHash: string): AuthContext | undefined {
    if (!this.#listening) return undefined;
    if (this.externalChanges) {
      const version = this.externalChanges();
      if (version !== this.#storeVersion) {
        this.#storeVersion = version;
        this.clear();
      }
    }
    const entry = this.#entries.get(keyHash);
    if (!entry) return undefined;
    const now = this.clock.now();
    if (
      now.getTime() - entry.cachedAt > this.ttlMs ||
      (entry.expiresAt !== null && entry.expiresAt <= now.toISOString())
    ) {
      this.#entries.delete(keyHash);
      return undefined;
    }
    return entry.auth;
  }

  /** Keeps a lookup's result unless a key changed since it started (`generation` read before it). */
  set(keyHash: string, auth: AuthContext, expiresAt: string | null, generation: number): void {
    if (!this.#listening || generation !== this.#generation) return;
    if (this.#entries.size >= this.maxEntries) this.#entries.clear();
    // One object serves many requests: nobody may change it.
    this.#entries.set(keyHash, {
      auth: Object.freeze(auth),
      expiresAt,
      cachedAt: this.clock.now().getTime(),
    });
  }
}
