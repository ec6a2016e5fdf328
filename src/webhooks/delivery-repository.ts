import { type Kysely, sql, type Transaction } from "kysely";
import type { DialectName } from "../store/database.ts";
import { PreparedQuery, type ValueOf } from "../store/prepared.ts";
import type { Database } from "../store/tables.ts";
import { type DeliveryTarget, pendingAttempt } from "./repository.ts";
import { CLAIMED, type DeliveryState, DONE, WAITING } from "./tables.ts";

type Trx = Transaction<Database>;

/** A claimed attempt with what sending it needs. */
export interface ClaimedDelivery extends DeliveryTarget {
  id: string;
  attempt: number;
  manual: boolean;
  /** The claim's lease end; only the holder of this exact lease may record the outcome. */
  lease: string;
  url: string;
  headers: string | null;
  retry_policy: string | null;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
  is_active: boolean;
  body: string;
}

export interface AttemptRecord {
  success: boolean;
  response_status: number;
  response_body: string;
  error: string | null;
  duration_ms: number;
  attempted_at: string;
}

export interface RetryPlan {
  /** When the next scheduled attempt is due; undefined = no further attempt. */
  nextRetryAt: string | undefined;
  /** A 410 Gone answer: the endpoint is switched off. */
  deactivateEndpoint: boolean;
}

/**
 * A finished attempt to record. `plan` decides what follows; a function when that depends on how many
 * scheduled attempts of the message the endpoint has had (read only then).
 */
export interface FinishedAttempt {
  delivery: ClaimedDelivery;
  outcome: AttemptRecord;
  plan: RetryPlan | ((scheduledAttemptsMade: number) => RetryPlan);
}

/** `recorded: false` when the claim was lost (its lease ran out and another worker took it) or the write failed. */
export interface RecordResult {
  recorded: boolean;
  nextRetryAt?: string;
  error?: unknown;
}

const truthy = (value: boolean | number): boolean => value === true || value === 1;

/**
 * Whether recording an outcome may write to its endpoint's row or refer to it anew: a failure may
 * queue the next attempt, a 410 switches the endpoint off.
 */
const touchesEndpoint = ({ plan }: FinishedAttempt): boolean =>
  typeof plan === "function" || Boolean(plan.nextRetryAt) || Boolean(plan.deactivateEndpoint);

/**
 * An attempt whose record is its own row alone: a scheduled attempt that succeeded (neither
 * `touchesEndpoint`, nor a manual retry, which may remove a waiting one).
 */
const writesOwnRowOnly = (attempt: FinishedAttempt): boolean =>
  !attempt.delivery.manual && !touchesEndpoint(attempt);

/** The endpoint ids of a candidate scan, as values of its prepared query. */
const endpointValues = (value: ValueOf<Scan>, saturated: string[]) =>
  saturated.map((_, index) => value((values) => values.saturated[index] as string));

/**
 * The order attempts are recorded in: endpoints, then pairs, are locked in this order, so two
 * recording transactions never wait on each other in a cycle.
 */
const pairKey = (delivery: ClaimedDelivery) => `${delivery.endpoint_id}/${delivery.message_id}`;

const byCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The delivery queue: claims due attempts, records their outcomes and schedules the next ones. On
 * PostgreSQL claims use `FOR UPDATE SKIP LOCKED` and the writers of one (message, endpoint) take an
 * advisory lock so attempt numbers never collide; SQLite has one writer.
 */
/** A candidate scan of `claim`: `saturated` endpoints are left out of its expired claims. */
interface Scan {
  now: string;
  limit: number;
  saturated: string[];
}

/** A look for endpoints with waiting attempts: `count` of them, from after `after` (from the first without it). */
interface EndpointLook {
  after: string | undefined;
  count: number;
}

/**
 * What a claim is made for: `endpoints` that asked (their round finished), and whether `anything`
 * due; `passOver`: endpoints `accept` would refuse, passed over before any read (many of them, all
 * with due attempts, would otherwise be refused one by one while they hide the others').
 */
export interface ClaimFor {
  endpoints: readonly string[];
  anything: boolean;
  passOver?: readonly string[];
}

/** A bounded deeper read of the oldest due attempts, in the store. */
interface DeeperScan {
  now: string;
  depth: number;
  passedOver: string[];
  limit: number;
}

/**
 * How many of the oldest due attempts a claim reads in the store before it looks endpoint by
 * endpoint: a look visits every endpoint with waiting attempts, also those only waiting for a retry
 * (QA of session 53: 3,000 such endpoints cost 10.8 ms a look, on every claim, behind one endpoint's
 * burst of a few hundred attempts).
 */
const DEEPER_ROWS = 4096;

/** Endpoints visited by one statement looking past the oldest attempts. */
const ENDPOINTS_PER_LOOK = 128;

/**
 * With at most this many endpoints holding waiting attempts (at the last look that went round them
 * all), a claim looks endpoint by endpoint before reading deeper: a seek per endpoint costs less than
 * the deeper read's rows (behind 200 slow endpoints' 20,000 due attempts, that read was half the
 * statements' time and found nothing a look would not).
 */
const LOOK_FIRST_ENDPOINTS = 256;

/** Due waiting attempts of `endpointIds`, at most `limit` of each. */
interface EndpointTake {
  endpointIds: string[];
  now: string;
  limit: number;
}

/** Candidates to take: the claim's lease, if they are still claimable at `now`. */
interface Take {
  ids: string[];
  now: string;
  lease: string;
}

/** A claimed attempt's row, with its endpoint and message: what sending it needs. */
const CLAIMED_COLUMNS = [
  "d.id",
  "d.message_id",
  "d.endpoint_id",
  "d.organization_id",
  "d.library_id",
  "d.video_id",
  "d.event",
  "d.attempt",
  "d.manual",
  "d.locked_until",
  "e.url",
  "e.headers",
  "e.retry_policy",
  "e.secret",
  "e.previous_secret",
  "e.previous_secret_expires_at",
  "e.is_active",
  "m.body",
] as const;

/** A prepared query's shape for a list: compiled once per length. */
const listLength = (list: readonly unknown[]) => String(list.length);

export class DeliveryRepository {
  // The queue's statements run for every attempt or claim, so they are built once
  // (src/store/prepared.ts). States are literals so both stores match the partial indexes' predicates.
  /** Claims whose lease ran out, oldest lease first: one scan of their partial index. */
  readonly #expiredClaims = new PreparedQuery(
    (value: ValueOf<Scan>, scan) => this.#expiredScan(value, scan),
    (scan) => listLength(scan.saturated),
  );
  /** The oldest waiting attempts that are due, whatever their endpoint: a few rows of their partial index. */
  readonly #dueAttempts = new PreparedQuery((value: ValueOf<Scan>) =>
    this.#dueScan(value).clearSelect().select(["id", "endpoint_id"]),
  );
  /**
   * Endpoints with waiting attempts, each with its oldest one's due time, from the first endpoint or
   * from after `after`: one seek of migration 0710's index per endpoint, however many attempts each holds.
   */
  readonly #waitingEndpoints = new PreparedQuery(
    (value: ValueOf<EndpointLook>, look) => {
      const from =
        look.after === undefined ? sql`` : sql`and endpoint_id > ${value((values) => values.after)}`;
      return {
        compile: () =>
          sql<{ endpoint_id: string; since: string }>`with recursive waiting(endpoint_id) as (
              select (select endpoint_id from "webhook_deliveries"
                where state = 'pending' ${from} order by endpoint_id limit 1)
              union all
              select (select d.endpoint_id from "webhook_deliveries" as d
                where d.state = 'pending' and d.endpoint_id > waiting.endpoint_id order by d.endpoint_id limit 1)
              from waiting where waiting.endpoint_id is not null
            )
            select endpoint_id, (select d.due_at from "webhook_deliveries" as d
                where d.state = 'pending' and d.endpoint_id = waiting.endpoint_id order by d.due_at limit 1) as since
            from waiting where endpoint_id is not null
            limit ${value((values) => values.count)}`.compile(this.db),
      };
    },
    (look) => (look.after === undefined ? "first" : "after"),
  );
  /**
   * Among the `depth` oldest due waiting attempts, the oldest `limit` of endpoints other than
   * `passedOver`: a bounded read of the due-time index, filtered in the store.
   */
  readonly #dueAmongOldest = new PreparedQuery((value: ValueOf<DeeperScan>) => {
    const now = value((values) => values.now);
    const depth = value((values) => values.depth);
    const limit = value((values) => values.limit);
    const notPassedOver =
      this.dialect === "postgres"
        ? sql`not (endpoint_id = any(${value((values) => values.passedOver)}::uuid[]))`
        : sql`endpoint_id not in (select value from json_each(${value((values) => JSON.stringify(values.passedOver))}))`;
    return {
      compile: () =>
        sql<{ id: string; endpoint_id: string; since: string }>`select id, endpoint_id, due_at as since
          from (
            select id, endpoint_id, due_at from "webhook_deliveries"
            where state = 'pending' and due_at <= ${now} order by due_at limit ${depth}
          ) as oldest
          where ${notPassedOver}
          order by due_at limit ${limit}`.compile(this.db),
    };
  });
  /** The oldest due waiting attempts of each endpoint named, at most `limit` of each: one seek per endpoint. */
  readonly #dueOfEndpoints = new PreparedQuery(
    (value: ValueOf<EndpointTake>, { endpointIds }) => {
      const dueOf = (index: number) =>
        this.#dueScan(
          value,
          value((values) => values.endpointIds[index] as string),
        );
      let query = this.db.selectFrom(dueOf(0).as("e0")).selectAll();
      for (let index = 1; index < endpointIds.length; index++) {
        query = query.unionAll(this.db.selectFrom(dueOf(index).as(`e${index}`)).selectAll());
      }
      return query;
    },
    ({ endpointIds }) => listLength(endpointIds),
  );
  /** Where the next look past the oldest attempts starts (`#behindPassedOver`): endpoints are served in turn. */
  #lookAfter: string | undefined;
  /** Endpoints with waiting attempts seen by the looks since the last one that reached the end. */
  #seenThisRound = 0;
  /** Endpoints with waiting attempts in the last round of looks that went round them all. */
  #endpointsWaiting: number | undefined;
  /** PostgreSQL: both scans in one statement, in the same order (one round trip instead of two). */
  readonly #candidates = new PreparedQuery(
    (value: ValueOf<Scan>, scan) =>
      this.db
        .selectFrom(this.#expiredScan(value, scan).as("expired"))
        .selectAll()
        .unionAll(this.db.selectFrom(this.#dueScan(value).as("due")).selectAll())
        .orderBy("queue")
        .orderBy("since"),
    (scan) => listLength(scan.saturated),
  );
  /** Takes the chosen candidates that are still claimable (another worker may have taken some). */
  readonly #take = new PreparedQuery(
    (value: ValueOf<Take>, { ids }) => this.#takeQuery(value, ids).returning("id"),
    ({ ids }) => listLength(ids),
  );
  /** What sending the claimed attempts needs. */
  readonly #claimedRows = new PreparedQuery(
    (value: ValueOf<string[]>, ids) =>
      this.db
        .selectFrom("webhook_deliveries as d")
        .innerJoin("webhook_endpoints as e", "e.id", "d.endpoint_id")
        .innerJoin("webhook_messages as m", "m.id", "d.message_id")
        .select(CLAIMED_COLUMNS)
        .where(
          "d.id",
          "in",
          ids.map((_, index) => value((values) => values[index] as string)),
        ),
    listLength,
  );
  /**
   * PostgreSQL: `#take` and `#claimedRows` in one statement (SQLite's `RETURNING` cannot name the joined
   * tables). Its commit does not wait for the disk: a claim lost in a crash leaves its attempts to be
   * claimed and sent again, at least once as before.
   */
  readonly #takeWithTargets = new PreparedQuery(
    (value: ValueOf<Take>, { ids }) =>
      this.#takeQuery(value, ids)
        .from([
          "webhook_endpoints as e",
          "webhook_messages as m",
          sql`(select set_config('synchronous_commit', 'off', true))`.as("lazy_commit"),
        ])
        .whereRef("e.id", "=", "d.endpoint_id")
        .whereRef("m.id", "=", "d.message_id")
        .returning(CLAIMED_COLUMNS),
    ({ ids }) => listLength(ids),
  );
  /** Records a made attempt, if this worker's claim on it still holds. */
  readonly #recordAttempt = new PreparedQuery(
    (value: ValueOf<{ delivery: ClaimedDelivery; outcome: AttemptRecord; nextRetryAt: string | null }>) =>
      this.db
        .updateTable("webhook_deliveries")
        .set({
          state: "done",
          locked_until: null,
          success: value((values) => values.outcome.success),
          response_status: value((values) => values.outcome.response_status),
          response_body: value((values) => values.outcome.response_body),
          error: value((values) => values.outcome.error),
          duration_ms: value((values) => values.outcome.duration_ms),
          next_retry_at: value((values) => values.nextRetryAt),
          created_at: value((values) => values.outcome.attempted_at),
          updated_at: value((values) => values.outcome.attempted_at),
        })
        .where(
          "id",
          "=",
          value((values) => values.delivery.id),
        )
        .where("state", "=", CLAIMED)
        .where(
          "locked_until",
          "=",
          value((values) => values.delivery.lease),
        ),
  );

  /**
   * PostgreSQL: records many attempts that write their own row alone (`writesOwnRowOnly`) in one
   * statement, their values passed as arrays, instead of one round trip each. The statement is its own
   * transaction and, like `#recording`, its commit does not wait for the disk (`set_config(..., true)`
   * lasts until that commit). Returns the recorded ids.
   */
  readonly #recordOwnRows = new PreparedQuery((value: ValueOf<FinishedAttempt[]>) => {
    const column = <T>(read: (attempt: FinishedAttempt) => T) => value((attempts) => attempts.map(read));
    return {
      compile: () =>
        sql<{ id: string }>`update webhook_deliveries as d
          set state = 'done', locked_until = null, success = a.success, response_status = a.status,
            response_body = a.body, error = a.error, duration_ms = a.duration, next_retry_at = null,
            created_at = a.attempted_at, updated_at = a.attempted_at
          from unnest(
            ${column((a) => a.delivery.id)}::uuid[], ${column((a) => a.delivery.lease)}::timestamptz[],
            ${column((a) => a.outcome.success)}::boolean[], ${column((a) => a.outcome.response_status)}::integer[],
            ${column((a) => a.outcome.response_body)}::text[], ${column((a) => a.outcome.error)}::text[],
            ${column((a) => a.outcome.duration_ms)}::integer[], ${column((a) => a.outcome.attempted_at)}::timestamptz[]
          ) as a(id, lease, success, status, body, error, duration, attempted_at),
          (select set_config('synchronous_commit', 'off', true)) as lazy_commit
          where d.id = a.id and d.state = 'sending' and d.locked_until = a.lease
          returning d.id`.compile(this.db),
    };
  });

  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
  ) {}

  #expiredScan(value: ValueOf<Scan>, scan: Scan) {
    return this.db
      .selectFrom("webhook_deliveries")
      .select(["id", "endpoint_id", sql.lit(0).as("queue"), sql<string>`locked_until`.as("since")])
      .where("state", "=", CLAIMED)
      .where(
        "locked_until",
        "<",
        value((values) => values.now),
      )
      .$if(scan.saturated.length > 0, (qb) =>
        qb.where("endpoint_id", "not in", endpointValues(value, scan.saturated)),
      )
      .orderBy("locked_until")
      .limit(value((values) => values.limit));
  }

  /** Due waiting attempts, oldest first: of the endpoint `endpointId` stands for, or of any. */
  #dueScan<Values extends { now: string; limit: number }>(value: ValueOf<Values>, endpointId?: string) {
    return this.db
      .selectFrom("webhook_deliveries")
      .select(["id", "endpoint_id", sql.lit(1).as("queue"), sql<string>`due_at`.as("since")])
      .where("state", "=", WAITING)
      .$if(endpointId !== undefined, (qb) => qb.where("endpoint_id", "=", endpointId as string))
      .where(
        "due_at",
        "<=",
        value((values) => values.now),
      )
      .orderBy("due_at")
      .limit(value((values) => values.limit));
  }

  /** Marks the chosen attempts that are still claimable (waiting, or claimed under a lease that ran out) as ours. */
  #takeQuery(value: ValueOf<Take>, ids: string[]) {
    return this.db
      .updateTable("webhook_deliveries as d")
      .set({
        state: "sending",
        locked_until: value((values) => values.lease),
        updated_at: value((values) => values.now),
      })
      .where(
        "d.id",
        "in",
        ids.map((_, index) => value((values) => values.ids[index] as string)),
      )
      .where((eb) =>
        eb.or([
          eb("d.state", "=", WAITING),
          eb.and([
            eb("d.state", "=", CLAIMED),
            eb(
              "d.locked_until",
              "<",
              value((values) => values.now),
            ),
          ]),
        ]),
      );
  }

  async #lockEndpoint(trx: Trx, endpointId: string): Promise<void> {
    if (this.dialect !== "postgres") return;
    await trx
      .selectFrom("webhook_endpoints")
      .select("id")
      .where("id", "=", endpointId)
      .forNoKeyUpdate()
      .execute();
  }

  async #lockPair(trx: Trx, messageId: string, endpointId: string): Promise<void> {
    if (this.dialect !== "postgres") return;
    await sql`select pg_advisory_xact_lock(hashtext(${`${messageId}/${endpointId}`}))`.execute(trx);
  }

  /**
   * Claims up to `limit` due attempts (and attempts whose worker's lease ran out) until `lease`.
   * Endpoints in `saturated` are passed over, and `accept` decides per candidate (an endpoint it
   * refuses once is passed over for the rest of the claim); candidates passed over stay pending.
   * `wantedBy`: what the claim is made for: endpoints whose round finished, sought first behind the
   * oldest, and whether anything due is wanted (new work, a retry due, a slot freed).
   * The oldest due attempts are read first; when they are all of endpoints passed over, deeper ones
   * are read in the store (`#dueAmongOldest`, skipped when few endpoints wait), then the endpoints
   * behind them are looked up by endpoint, so a slow endpoint's backlog is never read through
   * (`#behindPassedOver`). No transaction: the one update re-checks that each row is still
   * claimable and returns the rows it took, so two workers that chose the same candidates never both
   * get one.
   */
  async claim(
    now: string,
    lease: string,
    limit: number,
    saturated: string[],
    accept: (endpointId: string) => boolean,
    wantedBy: ClaimFor = { endpoints: [], anything: true },
  ): Promise<ClaimedDelivery[]> {
    // More candidates than the limit: some may be passed over.
    const scan = { now, limit: limit * 4, saturated };
    // SQLite runs the two scans apart (sorting their union was twice the work, in-process), the read
    // of waiting attempts with only what choosing needs: its rows' values, turned into JavaScript,
    // were most of a claim's reading (docs/performance.md, session 55).
    let candidates: { id: string; endpoint_id: string }[];
    let waitingRead: number;
    if (this.dialect === "postgres") {
      const rows = (await this.#candidates.execute(this.db, scan)).rows;
      candidates = rows;
      waitingRead = rows.filter((candidate) => Number(candidate.queue) === 1).length;
    } else {
      const expired = (await this.#expiredClaims.execute(this.db, scan)).rows;
      const waiting = (await this.#dueAttempts.execute(this.db, scan)).rows;
      candidates = [...expired, ...waiting];
      waitingRead = waiting.length;
    }
    const passedOver = new Set([...saturated, ...(wantedBy.passOver ?? [])]);
    // In the order chosen; an asking endpoint's attempts may be among the oldest read too.
    const chosen = new Set<string>();
    const choose = (candidate: { id: string; endpoint_id: string }) => {
      if (chosen.size >= limit || chosen.has(candidate.id) || passedOver.has(candidate.endpoint_id)) return;
      if (accept(candidate.endpoint_id)) chosen.add(candidate.id);
      else passedOver.add(candidate.endpoint_id);
    };
    for (const candidate of candidates) choose(candidate);
    // A full read of the oldest attempts may hide others. Those of the endpoints that asked for this
    // claim are sought by endpoint; the others only by a claim for anything due that took nothing
    // else: work hidden there came with a wake-up, a retry falling due or a slot freed, each of which
    // asks for such a claim (QA of session 53: looking on every claim cost twice the CPU).
    const hidden = waitingRead === scan.limit;
    const askingOpen = wantedBy.endpoints.filter((endpointId) => !passedOver.has(endpointId)).slice(0, limit);
    if (hidden && chosen.size < limit && askingOpen.length > 0) {
      const due = await this.#dueOfEndpoints.execute(this.db, { endpointIds: askingOpen, now, limit });
      for (const candidate of due.rows.sort((a, b) => byCodeUnits(a.since, b.since))) choose(candidate);
    }
    if (hidden && chosen.size === 0 && wantedBy.anything) {
      // Deeper into the oldest first (a burst for one endpoint), then endpoint by endpoint (a backlog);
      // with few endpoints waiting, only endpoint by endpoint: that look misses none.
      const fewEndpoints =
        this.#endpointsWaiting !== undefined && this.#endpointsWaiting <= LOOK_FIRST_ENDPOINTS;
      if (!fewEndpoints) {
        const deeper = { now, depth: DEEPER_ROWS, passedOver: [...passedOver], limit };
        for (const candidate of (await this.#dueAmongOldest.execute(this.db, deeper)).rows) choose(candidate);
      }
      if (chosen.size === 0) {
        for (const candidate of await this.#behindPassedOver(now, limit, passedOver)) choose(candidate);
      }
    }
    if (chosen.size === 0) return [];
    const take = { ids: [...chosen], now, lease };
    const rows =
      this.dialect === "postgres"
        ? (await this.#takeWithTargets.execute(this.db, take)).rows
        : await this.#takeThenRead(take);
    return rows.map(({ locked_until, ...row }) => ({
      ...row,
      lease: locked_until ?? lease,
      manual: truthy(row.manual),
      is_active: truthy(row.is_active),
    }));
  }

  /**
   * Due attempts that the oldest ones may hide: those of endpoints other than `passedOver`, oldest
   * endpoint first, at most `wanted` of each. Looks at ENDPOINTS_PER_LOOK endpoints with waiting
   * attempts at a time, from where the last look stopped, until one has an endpoint to serve or every
   * endpoint has been looked at once: a seek per endpoint, however many attempts each holds.
   */
  async #behindPassedOver(now: string, wanted: number, passedOver: ReadonlySet<string>) {
    const began = this.#lookAfter;
    let wentRound = began === undefined;
    for (;;) {
      const look = { after: this.#lookAfter, count: ENDPOINTS_PER_LOOK };
      const endpoints = (await this.#waitingEndpoints.execute(this.db, look)).rows;
      const atEnd = endpoints.length < ENDPOINTS_PER_LOOK;
      this.#lookAfter = atEnd ? undefined : endpoints.at(-1)?.endpoint_id;
      this.#seenThisRound += endpoints.length;
      if (atEnd) {
        this.#endpointsWaiting = this.#seenThisRound;
        this.#seenThisRound = 0;
      }
      const open = endpoints
        .filter((endpoint) => !passedOver.has(endpoint.endpoint_id) && endpoint.since <= now)
        .sort((a, b) => byCodeUnits(a.since, b.since))
        .slice(0, wanted)
        .map((endpoint) => endpoint.endpoint_id);
      if (open.length > 0) {
        const due = await this.#dueOfEndpoints.execute(this.db, { endpointIds: open, now, limit: wanted });
        return due.rows.sort((a, b) => byCodeUnits(a.since, b.since));
      }
      if (atEnd) {
        if (wentRound) return [];
        wentRound = true;
      } else if (
        wentRound &&
        began !== undefined &&
        endpoints.some((endpoint) => byCodeUnits(endpoint.endpoint_id, began) >= 0)
      ) {
        return [];
      }
    }
  }

  async #takeThenRead(take: Take) {
    const claimed = (await this.#take.execute(this.db, take)).rows;
    if (claimed.length === 0) return [];
    return (
      await this.#claimedRows.execute(
        this.db,
        claimed.map((row) => row.id),
      )
    ).rows;
  }

  /** Gives claimed attempts that were never sent back to the queue, due as they were. */
  async release(deliveries: ClaimedDelivery[], now: string): Promise<void> {
    for (const delivery of deliveries) {
      await this.db
        .updateTable("webhook_deliveries")
        .set({ state: "pending", locked_until: null, updated_at: now })
        .where("id", "=", delivery.id)
        .where("state", "=", CLAIMED)
        .where("locked_until", "=", delivery.lease)
        .execute();
    }
  }

  /**
   * Drops a claimed attempt that will not be made (its endpoint was switched off); the attempt that
   * scheduled it no longer names a next retry.
   */
  async drop(delivery: ClaimedDelivery): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await this.#lockPair(trx, delivery.message_id, delivery.endpoint_id);
      const dropped = await trx
        .deleteFrom("webhook_deliveries")
        .where("id", "=", delivery.id)
        .where("state", "=", CLAIMED)
        .where("locked_until", "=", delivery.lease)
        .executeTakeFirst();
      if (Number(dropped.numDeletedRows) > 0) await this.#noRetryAfter(trx, delivery);
    });
  }

  /** The pair's made attempts name no next retry: the one they named will not be made. */
  async #noRetryAfter(trx: Trx, delivery: Pick<ClaimedDelivery, "message_id" | "endpoint_id">) {
    await trx
      .updateTable("webhook_deliveries")
      .set({ next_retry_at: null })
      .where("message_id", "=", delivery.message_id)
      .where("endpoint_id", "=", delivery.endpoint_id)
      .where("state", "=", DONE)
      .where("next_retry_at", "is not", null)
      .execute();
  }

  /**
   * Records made attempts and schedules the next ones, all in one transaction (one commit for a
   * batch of finished attempts); on PostgreSQL successes go in one statement of their own (they write
   * their own row alone). When a batch fails as a whole, each of its attempts is recorded in a
   * transaction of its own, so one that cannot be written does not hold back the others; that one
   * stays claimed and is sent again once its lease runs out. Returns one result per attempt, in order.
   */
  async recordMany(attempts: FinishedAttempt[]): Promise<RecordResult[]> {
    // The same lock order in every batch, by endpoint id (as a library's deletion locks its endpoints:
    // compared by code unit, PostgreSQL's order of UUIDs) and then by message: concurrent workers'
    // endpoint and advisory locks cannot deadlock.
    const ordered = [...attempts].sort((a, b) => byCodeUnits(pairKey(a.delivery), pairKey(b.delivery)));
    // SQLite runs statements in-process, where one per attempt costs little.
    const successes = this.dialect === "postgres" ? ordered.filter(writesOwnRowOnly) : [];
    const others = ordered.filter((attempt) => !successes.includes(attempt));
    const results = new Map<FinishedAttempt, RecordResult>();
    await this.#recordBatch(successes, results, async () => {
      const recorded = new Set(
        (await this.#recordOwnRows.execute(this.db, successes)).rows.map((row) => row.id),
      );
      return successes.map((attempt) => ({ recorded: recorded.has(attempt.delivery.id) }));
    });
    await this.#recordBatch(others, results, () =>
      this.#recording(async (trx) => {
        const done: RecordResult[] = [];
        for (const attempt of others) done.push(await this.#record(trx, attempt));
        return done;
      }),
    );
    return attempts.map((attempt) => results.get(attempt) as RecordResult);
  }

  /** Records `attempts` with `write` (one result each, in order), or else each in a transaction of its own. */
  async #recordBatch(
    attempts: FinishedAttempt[],
    results: Map<FinishedAttempt, RecordResult>,
    write: () => Promise<RecordResult[]>,
  ): Promise<void> {
    if (attempts.length === 0) return;
    try {
      for (const [index, result] of (await write()).entries())
        results.set(attempts[index] as FinishedAttempt, result);
    } catch (batchError) {
      if (attempts.length === 1) {
        results.set(attempts[0] as FinishedAttempt, { recorded: false, error: batchError });
        return;
      }
      for (const attempt of attempts) {
        try {
          results.set(attempt, await this.#recording((trx) => this.#record(trx, attempt)));
        } catch (error) {
          results.set(attempt, { recorded: false, error });
        }
      }
    }
  }

  /**
   * A transaction recording outcomes. On PostgreSQL its commit does not wait for the disk: should the
   * database lose it in a crash, its attempts are still claimed and are sent again once their lease
   * runs out, as when the dispatcher's own process dies before recording (at least once either way).
   */
  #recording<T>(work: (trx: Trx) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(async (trx) => {
      if (this.dialect === "postgres") await sql`set local synchronous_commit = off`.execute(trx);
      return work(trx);
    });
  }

  async #record(trx: Trx, attempt: FinishedAttempt): Promise<RecordResult> {
    const { delivery, outcome, plan } = attempt;
    // The endpoint's row is locked first, as its deletion locks it before its attempts, so the two
    // never wait on each other in a cycle (PostgreSQL's deadlock).
    if (touchesEndpoint(attempt)) await this.#lockEndpoint(trx, delivery.endpoint_id);
    // The notification has arrived by hand, or the receiver answered 410 (CONTRACT 6: it stops
    // retries, also when a manual retry got it): a scheduled retry still waiting is not sent.
    const stopsRetries =
      (outcome.success && delivery.manual) || (typeof plan !== "function" && plan.deactivateEndpoint);
    // Only writes to the pair's other attempts (a retry queued, waiting ones removed) take its lock;
    // recording a scheduled attempt's success touches this attempt's row alone.
    if (typeof plan === "function" || delivery.manual || stopsRetries) {
      await this.#lockPair(trx, delivery.message_id, delivery.endpoint_id);
    }
    let decided: RetryPlan;
    if (typeof plan === "function") {
      const made = await trx
        .selectFrom("webhook_deliveries")
        .select(sql<number>`count(*)`.as("count"))
        .where("message_id", "=", delivery.message_id)
        .where("endpoint_id", "=", delivery.endpoint_id)
        .where("state", "=", DONE)
        .where("manual", "=", false)
        .executeTakeFirstOrThrow();
      decided = plan(Number(made.count) + (delivery.manual ? 0 : 1));
    } else {
      decided = plan;
    }
    const nextRetryAt = delivery.manual ? undefined : decided.nextRetryAt;
    const updated = await this.#recordAttempt.execute(trx, {
      delivery,
      outcome,
      nextRetryAt: nextRetryAt ?? null,
    });
    if (Number(updated.numAffectedRows ?? 0) === 0) return { recorded: false };
    if (stopsRetries) {
      // Other manual retries asked for are explicit requests and stay. A scheduled attempt that
      // succeeds is the latest scheduled one (the next is only queued when it fails), so it never
      // leaves a scheduled retry behind.
      const dropped = await trx
        .deleteFrom("webhook_deliveries")
        .where("message_id", "=", delivery.message_id)
        .where("endpoint_id", "=", delivery.endpoint_id)
        .where("state", "=", WAITING)
        .where("manual", "=", false)
        .executeTakeFirst();
      if (Number(dropped.numDeletedRows) > 0) await this.#noRetryAfter(trx, delivery);
    }
    if (nextRetryAt) {
      await trx
        .insertInto("webhook_deliveries")
        .values(
          pendingAttempt(delivery, {
            attempt: (await this.#lastAttempt(trx, delivery.message_id, delivery.endpoint_id)) + 1,
            dueAt: nextRetryAt,
            now: outcome.attempted_at,
          }),
        )
        .execute();
    }
    if (decided.deactivateEndpoint) {
      await trx
        .updateTable("webhook_endpoints")
        .set({ is_active: false, updated_at: outcome.attempted_at })
        .where("id", "=", delivery.endpoint_id)
        .execute();
    }
    return { recorded: true, nextRetryAt };
  }

  async #lastAttempt(trx: Trx, messageId: string, endpointId: string): Promise<number> {
    const row = await trx
      .selectFrom("webhook_deliveries")
      .select(sql<number | null>`max(attempt)`.as("last"))
      .where("message_id", "=", messageId)
      .where("endpoint_id", "=", endpointId)
      .executeTakeFirst();
    return Number(row?.last ?? 0);
  }

  /**
   * Queues one extra attempt of a message to an endpoint, due now. It is numbered after every attempt
   * made or asked for; a scheduled retry still waiting moves one number up so numbers follow sending order.
   */
  async queueManual(
    trx: Trx,
    source: {
      message_id: string;
      endpoint_id: string;
      organization_id: string;
      library_id: string;
      video_id: string | null;
      event: string;
    },
    now: string,
  ): Promise<{ id: string; attempt: number }> {
    await this.#lockPair(trx, source.message_id, source.endpoint_id);
    const rows = await trx
      .selectFrom("webhook_deliveries")
      .select(["id", "attempt", "state", "manual"])
      .where("message_id", "=", source.message_id)
      .where("endpoint_id", "=", source.endpoint_id)
      .orderBy("attempt", "desc")
      .execute();
    const waiting = rows.filter((row) => row.state === "pending" && !truthy(row.manual));
    const attempt =
      Math.max(0, ...rows.filter((row) => !waiting.includes(row)).map((row) => row.attempt)) + 1;
    for (const row of waiting) {
      if (row.attempt >= attempt) {
        await trx
          .updateTable("webhook_deliveries")
          .set({ attempt: row.attempt + 1, updated_at: now })
          .where("id", "=", row.id)
          .execute();
      }
    }
    const row = pendingAttempt(source, { attempt, dueAt: now, now, manual: true });
    const id = row.id;
    await trx.insertInto("webhook_deliveries").values(row).execute();
    return { id, attempt };
  }

  /**
   * Writes dispatchers' judgments, in one transaction: each endpoint slow since the time given, or no
   * longer slow (null). Endpoints deleted meanwhile are left out. On PostgreSQL the endpoints are locked
   * first, as a deletion locks them before its cascade reaches their marks, and every row is written
   * in id order, so that workers writing the same endpoints cannot deadlock.
   */
  async markSlow(marks: ReadonlyMap<string, string | null>): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const existing = trx
        .selectFrom("webhook_endpoints")
        .select("id")
        .where("id", "in", [...marks.keys()])
        // The same order on both stores: PostgreSQL's of UUIDs is their text's, code unit by code unit.
        .orderBy("id");
      const rows = await (this.dialect === "postgres" ? existing.forKeyShare() : existing).execute();
      for (const { id } of rows) {
        const since = marks.get(id);
        if (since)
          await trx
            .insertInto("webhook_slow_endpoints")
            .values({ endpoint_id: id, slow_since: since })
            .onConflict((conflict) => conflict.column("endpoint_id").doUpdateSet({ slow_since: since }))
            .execute();
        else await trx.deleteFrom("webhook_slow_endpoints").where("endpoint_id", "=", id).execute();
      }
    });
  }

  /** The endpoints judged slow, the most recently judged first, at most `limit`. */
  async slowEndpoints(limit: number): Promise<string[]> {
    const rows = await this.db
      .selectFrom("webhook_slow_endpoints")
      .select("endpoint_id")
      .orderBy("slow_since", "desc")
      .limit(limit)
      .execute();
    return rows.map((row) => row.endpoint_id);
  }

  /** Attempts waiting to be sent or being sent, by state, for the metrics scrape. */
  async backlog(): Promise<{ state: DeliveryState; count: number }[]> {
    return this.db
      .selectFrom("webhook_deliveries")
      .select((eb) => ["state", eb.fn.countAll<number>().as("count")])
      .where("state", "in", [WAITING, CLAIMED])
      .groupBy("state")
      .execute();
  }

  /** When the earliest waiting attempt is due, to wake exactly then. */
  async nextDue(): Promise<string | undefined> {
    const row = await this.db
      .selectFrom("webhook_deliveries")
      .select(sql<string | null>`min(due_at)`.as("due"))
      .where("state", "=", WAITING)
      .executeTakeFirst();
    return row?.due ?? undefined;
  }
}
