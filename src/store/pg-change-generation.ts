import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from "kysely";
import type { StoreGeneration } from "./database.ts";
import { STORE_CHANGES_CHANNEL } from "./migrations/0700-store-change-notifications.ts";
import { TRAFFIC_CHANGE_PAYLOAD } from "./migrations/0701-traffic-change-notifications.ts";
import type { ListenHandlers, PgListener } from "./pg-listener.ts";
import { wrappingClients } from "./pg-pool.ts";

/** A statement that only reads: every other one (writes, `with`, ...) may change data. */
const PLAIN_SELECT = /^\s*select\b/i;
/**
 * A transaction's bounds change no data themselves: its writes move the generation as they run, and
 * its commit reaches kept answers through its notification, which `caughtUp` waits for.
 */
const TRANSACTION_CONTROL =
  /^\s*(?:begin|start\s+transaction|commit|end|rollback|abort|savepoint|release)\b/i;

/**
 * PostgreSQL's store generation: what kept answers are checked against (src/http/response-cache.ts).
 * It moves
 * - before and after each statement of this process that is not a plain `select` nor a transaction's
 *   bounds (`moved`, through `trackingWrites`): this node's own writes are seen as they are made, and
 *   an answer whose reads overlapped one is not kept;
 * - on each notification of `STORE_CHANGES_CHANNEL`: another process's commit (another node, the CLI,
 *   an operator's SQL) to an announced table (migration 0700);
 * - when its listening connection is established, again after each loss. While it is lost there is
 *   no generation, and nothing is kept or served.
 * `caughtUp` closes the gap between another process's commit and its notification reaching this one.
 * Other processes' changes to the traffic rollups (migration 0701) move only `withTraffic`.
 */
export class PgChangeGeneration implements StoreGeneration {
  #generation = 0;
  #trafficChanges = 0;
  #listening = false;
  #listener: PgListener | undefined;
  /** The barrier query on the wire, and the one that will follow it for requests that came later. */
  #sent: Promise<void> | undefined;
  #queued: Promise<void> | undefined;

  constructor(private readonly listen: (channel: string, handlers: ListenHandlers) => Promise<PgListener>) {}

  /**
   * Listens on a connection of its own (kept until the store closes); `onLost` is told each time it
   * drops (each failed try to listen again too), `onHeard` each time it listens.
   */
  async start(onLost: (error?: unknown) => void, onHeard?: () => void): Promise<void> {
    this.#listener = await this.listen(STORE_CHANGES_CHANNEL, {
      onListening: () => {
        this.moved();
        this.#listening = true;
        onHeard?.();
      },
      onNotification: (payload) => {
        if (payload === TRAFFIC_CHANGE_PAYLOAD) this.#trafficChanges++;
        else this.moved();
      },
      // Nothing is kept or served until `onListening` moves the generation again.
      onLost: (error) => {
        this.#listening = false;
        onLost(error);
      },
    });
  }

  moved(): void {
    this.#generation++;
  }

  current(): number | undefined {
    return this.#listening ? this.#generation : undefined;
  }

  /**
   * This generation, moved also by other processes' changes to the traffic rollups: what kept analytics
   * buckets are checked against. Both counts only grow, so their sum moves whenever either does.
   */
  readonly withTraffic: StoreGeneration = {
    current: () => (this.#listening ? this.#generation + this.#trafficChanges : undefined),
    caughtUp: () => this.caughtUp(),
  };

  /**
   * Resolves once every commit made anywhere before the call has moved the generation: PostgreSQL
   * signals the listening sessions before it answers the committing one, and a session sends what it
   * was signalled before it answers its next query (`PgListener.caughtUp`). One such round trip serves
   * every request that arrived before it was sent; a request arriving while one is on the wire waits
   * for the next.
   */
  caughtUp(): Promise<void> {
    if (this.#queued) return this.#queued;
    if (!this.#sent) {
      this.#sent = this.#send();
      return this.#sent;
    }
    this.#queued = this.#sent.then(() => {
      this.#queued = undefined;
      this.#sent = this.#send();
      return this.#sent;
    });
    return this.#queued;
  }

  async #send(): Promise<void> {
    await this.#listener?.caughtUp();
    this.#sent = undefined;
  }
}

/** A pool client that tells `moved` before and after each statement that may change data. */
class TrackingClient implements PostgresPoolClient {
  constructor(
    private readonly client: PostgresPoolClient,
    private readonly moved: () => void,
  ) {}

  query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(
    sqlOrCursor: string | PostgresCursor<R>,
    parameters?: ReadonlyArray<unknown>,
  ): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    // Cursors stream reads (`stream()`); Kysely sends writes as text.
    if (typeof sqlOrCursor !== "string") return this.client.query(sqlOrCursor);
    if (PLAIN_SELECT.test(sqlOrCursor) || TRANSACTION_CONTROL.test(sqlOrCursor)) {
      return this.client.query(sqlOrCursor, parameters ?? []);
    }
    this.moved();
    return this.client.query<R>(sqlOrCursor, parameters ?? []).finally(this.moved);
  }

  release(): void {
    this.client.release();
  }
}

/** `pool`, with every client telling `moved` around the statements that may change data. */
export const trackingWrites = (pool: PostgresPool, moved: () => void): PostgresPool =>
  wrappingClients(pool, (client) => new TrackingClient(client, moved));
