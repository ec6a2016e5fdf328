import { randomUUID } from "node:crypto";
import { Acknowledgements } from "../acknowledgements.ts";
import { type Bus, unlessBusUnavailable } from "../bus.ts";
import type { Clock } from "../clock.ts";
import type { Store } from "../store/database.ts";
import { KEY_CHANGES_CHANNEL } from "../store/migrations/0006-identity-key-notifications.ts";
import type { AuthContext } from "./service.ts";

/** Bus channel of key changes (`KeyAnnouncement`), so every node drops what it cached. */
export const KEY_CHANGED_CHANNEL = "identity.key-changed";

/**
 * A bound on staleness should a node miss a key change (its Redis connection failing as the change
 * is announced) or not acknowledge it in time; normally every node has dropped the key before the
 * change is answered.
 */
export const AUTH_CACHE_TTL_MS = 2000;

/** How long the node that changed a key waits for each other node's word that it dropped its cache. */
export const KEY_CHANGE_ACK_TIMEOUT_MS = 1000;

/**
 * What nodes tell each other on `KEY_CHANGED_CHANNEL`, or on PostgreSQL's `KEY_CHANGES_CHANNEL`
 * (where the store's own trigger sends an empty payload): a key changed, or a node dropped its cache
 * after change `heard`.
 */
type KeyAnnouncement = { changed: string } | { heard: string; node: string };

/** Anything but an announcement (the trigger's empty payload, an older node's key id) is a plain change. */
function readAnnouncement(message: string): KeyAnnouncement | undefined {
  if (!message.startsWith("{")) return undefined;
  try {
    const value = JSON.parse(message) as Partial<Record<string, unknown>>;
    if (typeof value.heard === "string" && typeof value.node === "string") {
      return { heard: value.heard, node: value.node };
    }
    return typeof value.changed === "string" ? { changed: value.changed } : undefined;
  } catch {
    return undefined;
  }
}

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
 * use; on PostgreSQL, where the store itself announces every key change as it commits (`listen` with
 * `storeListen`), heard with Redis too, since a writer without it (the CLI run with DATABASE_URL
 * alone, an operator's SQL) tells no node through Redis. The last two reach the other nodes a moment
 * after the change is committed, so the node that made it waits for their word that they dropped
 * their caches before it answers (`changed`). See docs/decisions.md.
 */
export class AuthCache {
  readonly #entries = new Map<string, Entry>();
  #generation = 0;
  #listening = false;
  #storeVersion: number | undefined;
  /**
   * Sends a `KeyAnnouncement` to every other node; resolves to how many were sent it. Set as listening
   * starts: a change can be heard (and must be acknowledged) before listening has resolved.
   */
  #tellOthers: ((message: string) => Promise<number>) | undefined;
  #started: Promise<void> | undefined;
  readonly #node = randomUUID();
  readonly #acknowledgements = new Acknowledgements(KEY_CHANGE_ACK_TIMEOUT_MS);

  constructor(
    private readonly ttlMs: number,
    private readonly clock: Clock,
    private readonly externalChanges?: () => number,
    private readonly maxEntries = 10_000,
  ) {
    this.#storeVersion = externalChanges?.();
  }

  /**
   * Starts serving from the cache once this node hears every key change: through the bus with Redis
   * (`viaBus`, always without `storeListen`), else from the store itself (PostgreSQL), where every
   * transaction that changes a key notifies as it commits (a trigger, so the CLI's and an operator's
   * SQL too). Without Redis this node serves from the cache only while its listening connection is
   * up; whatever was cached or looked up before that connection was (re)established is dropped. With
   * Redis the store is listened to as well where it can be (a direct connection, not PgBouncer in
   * transaction mode): a writer without the nodes' Redis (the CLI run with `DATABASE_URL` alone) is
   * heard there and answered there, while the cache relies on the bus alone.
   */
  listen(bus: Bus, storeListen?: StoreListen, viaBus = false): Promise<void> {
    this.#started = this.#listen(bus, storeListen, viaBus || storeListen === undefined);
    return this.#started;
  }

  async #listen(bus: Bus, storeListen: StoreListen | undefined, viaBus: boolean): Promise<void> {
    // Key changes sent while this node was cut off from the others are lost; a developer-mode reset too.
    bus.onReconnect(() => this.clear());
    let busHeard = !viaBus;
    // With the bus, the store is an extra way to hear changes, not one the cache depends on.
    let storeHeard = storeListen === undefined || viaBus;
    const update = () => {
      this.#listening = busHeard && storeHeard;
    };
    if (viaBus) {
      // With Redis away the others' cached entries still expire within 2 s.
      const publish = (message: string) =>
        bus.publish(KEY_CHANGED_CHANNEL, message).catch(unlessBusUnavailable);
      this.#tellOthers = publish;
      await bus.subscribe(KEY_CHANGED_CHANNEL, (message) => this.#heard(message, publish));
      busHeard = true;
      update();
    }
    if (!storeListen) return;
    // Named, and so counted by the store's announcers, only once it listens (see `#heard`).
    let storeListening = false;
    const listener = storeListen.listen(KEY_CHANGES_CHANNEL, {
      onListening: () => {
        this.clear();
        storeListening = true;
        storeHeard = true;
        update();
      },
      // A word goes back the way the announcement came: a process without Redis waits for it there.
      onNotification: (payload) =>
        this.#heard(payload, async (message) => {
          if (storeListening) await (await listener).notifyOthers(message);
        }),
      onLost: (error) => {
        storeListening = false;
        storeHeard = viaBus;
        update();
        this.clear();
        storeListen.onLost(error);
      },
    });
    if (!viaBus) this.#tellOthers = async (message) => (await listener).notifyOthers(message);
    await listener;
  }

  /**
   * After this node committed a key change: drops what it cached, tells the other nodes, and resolves
   * once each one listening has dropped its own cache (`KEY_CHANGE_ACK_TIMEOUT_MS` at most), so the
   * change holds on every node from the moment it is answered. On SQLite every node reads the store's
   * `data_version` before each use instead, and nothing needs telling.
   */
  async changed(): Promise<void> {
    this.clear();
    if (this.externalChanges) return;
    await this.#started?.catch(() => undefined);
    // Committed either way: a node not told keeps the key `AUTH_CACHE_TTL_MS` at most.
    await this.#acknowledgements.announce((id) => this.#announceChange(id)).catch(() => undefined);
  }

  /** Resolves to how many other nodes were told (none to wait for while this one cannot hear them). */
  async #announceChange(id: string): Promise<number> {
    const others = (await this.#tellOthers?.(JSON.stringify({ changed: id } satisfies KeyAnnouncement))) ?? 0;
    return this.#listening ? others : 0;
  }

  /**
   * A key change announced by any node or by the store, or a node's word that it heard one; `reply`
   * sends this node's word back the way the announcement came.
   */
  #heard(message: string, reply: (message: string) => Promise<unknown>): void {
    const announcement = readAnnouncement(message);
    if (announcement && "heard" in announcement) {
      this.#acknowledgements.heard(announcement.heard, announcement.node);
      return;
    }
    this.clear();
    // This node's own announcement comes back to it (the bus runs local handlers; PostgreSQL tells
    // the sending session's own listening).
    if (!announcement || this.#acknowledgements.awaits(announcement.changed)) return;
    // Not listening yet, it serves nothing from its cache; and on PostgreSQL the announcer did not
    // count it (its session is named once it listens), so its word would stand in for a counted node's.
    if (!this.#listening) return;
    const heard = JSON.stringify({ heard: announcement.changed, node: this.#node } satisfies KeyAnnouncement);
    reply(heard).catch(() => undefined);
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
    const age = now.getTime() - entry.cachedAt;
    // An entry from the future was made before developer mode's clock was put back.
    if (age < 0 || age > this.ttlMs || (entry.expiresAt !== null && entry.expiresAt <= now.toISOString())) {
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
