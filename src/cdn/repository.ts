import { setImmediate } from "node:timers/promises";
import { type Insertable, type Kysely, sql, type Transaction } from "kysely";
import type { Page } from "../http/pagination.ts";
import { touchedOnlyWhenChanged } from "../store/changes.ts";
import { chunksOf } from "../store/chunks.ts";
import type { DialectName } from "../store/database.ts";
import { selectPage } from "../store/paging.ts";
import { PreparedQuery, type ValueOf } from "../store/prepared.ts";
import type { Database } from "../store/tables.ts";
import { type Executor, isUniqueViolation } from "../store/transactions.ts";
import type {
  DistributionChanges,
  DistributionRow,
  OrganizationTrafficTable,
  PurgeTable,
  TrafficMinuteTable,
} from "./tables.ts";

/** Raised when a hostname is taken (the store's unique index said so). */
export class HostnameTakenError extends Error {
  constructor(readonly hostname: string) {
    super(`hostname ${hostname} is already used by another distribution`);
    this.name = "HostnameTakenError";
  }
}

export class DistributionRepository {
  constructor(readonly db: Kysely<Database>) {}

  /** Inserts a distribution; a taken hostname raises `HostnameTakenError`. */
  async insert(executor: Executor, row: DistributionRow): Promise<void> {
    try {
      await executor.insertInto("cdn_distributions").values(row).execute();
    } catch (error) {
      if (isUniqueViolation(error)) throw new HostnameTakenError(row.hostname);
      throw error;
    }
  }

  async delete(executor: Executor, organizationId: string, id: string): Promise<boolean> {
    const result = await executor
      .deleteFrom("cdn_distributions")
      .where("organization_id", "=", organizationId)
      .where("id", "=", id)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /**
   * Deletes the distribution if it is still the organization's and its host name still a pending
   * claim (not verified meanwhile): what a takeover of the name may remove.
   */
  async deletePendingClaim(executor: Executor, organizationId: string, id: string): Promise<boolean> {
    const result = await executor
      .deleteFrom("cdn_distributions")
      .where("organization_id", "=", organizationId)
      .where("id", "=", id)
      .where("hostname_token", "is not", null)
      .where("hostname_verified_at", "is", null)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** The distribution if it belongs to the organization. */
  find(organizationId: string, id: string, executor: Executor = this.db) {
    return executor
      .selectFrom("cdn_distributions")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .where("id", "=", id)
      .executeTakeFirst();
  }

  /** Any organization's distribution by host name: what the edge serves. */
  findByHostname(hostname: string) {
    return this.db
      .selectFrom("cdn_distributions")
      .selectAll()
      .where("hostname", "=", hostname)
      .executeTakeFirst();
  }

  /** A library's own distribution. */
  findByLibrary(libraryId: string) {
    return this.db
      .selectFrom("cdn_distributions")
      .selectAll()
      .where("library_id", "=", libraryId)
      .executeTakeFirst();
  }

  /** Every distribution of every organization, read a page at a time (start-up checks). */
  async *scanAll(pageSize = 1000) {
    let after: string | undefined;
    for (;;) {
      let query = this.db.selectFrom("cdn_distributions").selectAll();
      if (after !== undefined) query = query.where("id", ">", after);
      const rows = await query.orderBy("id").limit(pageSize).execute();
      yield* rows;
      const last = rows.at(-1);
      if (!last || rows.length < pageSize) return;
      after = last.id;
    }
  }

  findByHostnameInOrganization(organizationId: string, hostname: string) {
    return this.db
      .selectFrom("cdn_distributions")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .where("hostname", "=", hostname)
      .executeTakeFirst();
  }

  list(organizationId: string, page: Page) {
    return selectPage(
      this.db
        .selectFrom("cdn_distributions")
        .selectAll()
        .where("organization_id", "=", organizationId)
        .orderBy("created_at", "desc")
        .orderBy("id", "desc"),
      page,
    );
  }

  async update(
    executor: Executor,
    organizationId: string,
    id: string,
    changes: DistributionChanges,
  ): Promise<boolean> {
    const result = await executor
      .updateTable("cdn_distributions")
      .set(touchedOnlyWhenChanged(changes))
      .where("organization_id", "=", organizationId)
      .where("id", "=", id)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Marks a pending host name verified, if the distribution still has this token (the token a
   * lookup checked). Verified already, or gone: nothing changes.
   */
  async markHostnameVerified(
    executor: Executor,
    organizationId: string,
    id: string,
    token: string,
    at: string,
  ): Promise<void> {
    await executor
      .updateTable("cdn_distributions")
      .set({ hostname_verified_at: at, updated_at: at })
      .where("organization_id", "=", organizationId)
      .where("id", "=", id)
      .where("hostname_token", "=", token)
      .where("hostname_verified_at", "is", null)
      .execute();
  }

  async insertPurge(executor: Executor, row: Insertable<PurgeTable>): Promise<void> {
    await executor.insertInto("cdn_purges").values(row).execute();
  }

  listPurges(organizationId: string, distributionId: string, page: Page) {
    return selectPage(
      this.db
        .selectFrom("cdn_purges")
        .selectAll()
        .where("organization_id", "=", organizationId)
        .where("distribution_id", "=", distributionId)
        .orderBy("created_at", "desc")
        .orderBy("id", "desc"),
      page,
    );
  }
}

export type TrafficCounters = Omit<TrafficMinuteTable, "distribution_id" | "organization_id" | "minute">;

export const TRAFFIC_COUNTERS: (keyof TrafficCounters)[] = [
  "requests",
  "sent_bytes",
  "upstream_bytes",
  "origin_time_ms",
  "origin_fetches",
  "responses_2xx",
  "responses_3xx",
  "responses_4xx",
  "responses_5xx",
];

export type TrafficCounter = keyof TrafficCounters;

/**
 * Bucket sums as columns, one entry per bucket with traffic, in no particular order: `bucket[i]` is
 * the i-th bucket's index from the epoch (its start is `bucket * granularity` minutes) and each
 * counter asked for holds that bucket's sum at `[i]`.
 */
export type TrafficBucketColumns<Counter extends TrafficCounter> = Record<"bucket" | Counter, number[]>;

/** The rollup tables by period length, finest first. */
const RESOLUTIONS = [
  { minutes: 1, distribution: "cdn_traffic_minutes", organization: "cdn_organization_traffic_minutes" },
  {
    minutes: 5,
    distribution: "cdn_traffic_five_minutes",
    organization: "cdn_organization_traffic_five_minutes",
  },
  {
    minutes: 15,
    distribution: "cdn_traffic_quarter_hours",
    organization: "cdn_organization_traffic_quarter_hours",
  },
  { minutes: 60, distribution: "cdn_traffic_hours", organization: "cdn_organization_traffic_hours" },
  { minutes: 1440, distribution: "cdn_traffic_days", organization: "cdn_organization_traffic_days" },
] as const;

type RollupTable = (typeof RESOLUTIONS)[number]["distribution" | "organization"];

/** Which rollup rows an analytics query reads: a distribution's or an organization's. */
type BucketScan =
  | { table: (typeof RESOLUTIONS)[number]["distribution"]; scope: "distribution_id"; id: string }
  | { table: (typeof RESOLUTIONS)[number]["organization"]; scope: "organization_id"; id: string };

type BucketSumsQuery = BucketScan & {
  resolutionMinutes: number;
  fromMinute: number;
  toMinute: number;
  granularityMinutes: number;
  counters: readonly TrafficCounter[];
};

/**
 * Sums minute rows into one row per scope (distribution or organization) and period of `minutes`,
 * in key order: every flush locks rows in the same order, so concurrent flushes cannot deadlock.
 */
function rollUp<Row extends OrganizationTrafficTable>(
  rows: TrafficMinuteTable[],
  minutes: number,
  scopeOf: (row: TrafficMinuteTable) => string,
  startPeriod: (row: TrafficMinuteTable, minute: number) => Row,
): Row[] {
  const periods = new Map<string, Row>();
  for (const row of rows) {
    const minute = row.minute - (row.minute % minutes);
    const key = `${scopeOf(row)}|${minute}`;
    const period = periods.get(key);
    if (!period) periods.set(key, startPeriod(row, minute));
    else for (const column of TRAFFIC_COUNTERS) period[column] += row[column];
  }
  return [...periods.keys()].sort().map((key) => periods.get(key) as Row);
}

/** Minute and five-minute rollups removed per statement by retention (an hour of every distribution). */
const PRUNED_MINUTES_PER_STATEMENT = 60;

const countersOf = (row: TrafficCounters): TrafficCounters =>
  Object.fromEntries(TRAFFIC_COUNTERS.map((column) => [column, row[column]])) as unknown as TrafficCounters;

/**
 * Edge traffic rollups per minute, five minutes, quarter hour, hour and day, per distribution and per
 * organization: added to by every edge node's flush, read by the analytics query from the coarsest
 * table that fits.
 */
export class TrafficRepository {
  constructor(
    readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
  ) {}

  /** Adds minute counters to every rollup table (creating rows), in one transaction. */
  async add(rows: TrafficMinuteTable[]): Promise<void> {
    if (rows.length === 0) return;
    await this.db.transaction().execute(async (trx) => {
      const counted = await this.#ofExistingOrganizations(trx, rows);
      if (counted.length === 0) return;
      for (const resolution of RESOLUTIONS) {
        const byDistribution = rollUp(
          counted,
          resolution.minutes,
          (row) => row.distribution_id,
          (row, minute) => ({ ...row, minute }),
        );
        await this.#upsertAdd(trx, resolution.distribution, "distribution_id", byDistribution);
        const byOrganization = rollUp(
          counted,
          resolution.minutes,
          (row) => row.organization_id,
          (row, minute) => ({ organization_id: row.organization_id, minute, ...countersOf(row) }),
        );
        await this.#upsertAdd(trx, resolution.organization, "organization_id", byOrganization);
      }
    });
  }

  /**
   * The rows whose organization still exists. Counts of one removed since they were counted (deleted,
   * or emptied by a developer-mode reset) have no row to belong to: kept, they would fail every
   * flush with a foreign-key error, and with it everyone else's counts.
   */
  async #ofExistingOrganizations(trx: Transaction<Database>, rows: TrafficMinuteTable[]) {
    const existing = new Set<string>();
    for (const ids of chunksOf([...new Set(rows.map((row) => row.organization_id))])) {
      const found = await trx.selectFrom("organizations").select("id").where("id", "in", ids).execute();
      for (const { id } of found) existing.add(id);
    }
    return rows.filter((row) => existing.has(row.organization_id));
  }

  async #upsertAdd(
    trx: Transaction<Database>,
    table: RollupTable,
    scope: "distribution_id" | "organization_id",
    rows: OrganizationTrafficTable[],
  ): Promise<void> {
    const added = Object.fromEntries(
      TRAFFIC_COUNTERS.map((column) => [
        column,
        sql`${sql.ref(`${table}.${column}`)} + ${sql.ref(`excluded.${column}`)}`,
      ]),
    );
    // Bounded batches keep each statement under the stores' bind-parameter limits.
    for (let index = 0; index < rows.length; index += 500) {
      await trx
        .insertInto(table)
        .values(rows.slice(index, index + 500))
        .onConflict((conflict) => conflict.columns([scope, "minute"]).doUpdateSet(added))
        .execute();
    }
  }

  /**
   * Deletes minute and five-minute rollups before `beforeMinute` (the coarser ones stay); returns how
   * many went. The time is rounded down to five minutes, so a five-minute row goes with all of its
   * minutes and a `5m` bucket always equals the minute data kept, as when `5m` read the minutes.
   */
  async pruneMinutesBefore(beforeMinute: number): Promise<number> {
    const before = beforeMinute - (beforeMinute % 5);
    let removed = 0;
    for (const table of [
      "cdn_traffic_minutes",
      "cdn_organization_traffic_minutes",
      "cdn_traffic_five_minutes",
      "cdn_organization_traffic_five_minutes",
    ] as const) {
      // An hour of rollups per statement keeps each delete, and the locks it holds, short, and the
      // event loop is let go between them: on SQLite a statement holds the whole process, and after
      // days of downtime a day per statement held it for seconds.
      for (;;) {
        const oldest = await this.db
          .selectFrom(table)
          .select((eb) => eb.fn.min("minute").as("minute"))
          .executeTakeFirst();
        if (oldest?.minute == null || Number(oldest.minute) >= before) break;
        const result = await this.db
          .deleteFrom(table)
          .where("minute", "<", Math.min(before, Number(oldest.minute) + PRUNED_MINUTES_PER_STATEMENT))
          .executeTakeFirst();
        removed += Number(result.numDeletedRows);
        await setImmediate();
      }
    }
    return removed;
  }

  /**
   * Sums `counters` over the minutes in [fromMinute, toMinute) per bucket of `granularityMinutes`,
   * for one distribution (already known to be the organization's) or for all of an organization's,
   * from the coarsest rollup whose periods tile the buckets: days for `1d`, hours for `1h` and `6h`,
   * quarter hours for `15m`, five minutes for `5m`. Buckets without traffic are left out.
   */
  async sumByBucket<Counter extends TrafficCounter>(input: {
    organizationId: string;
    distributionId: string | undefined;
    fromMinute: number;
    toMinute: number;
    granularityMinutes: number;
    counters: readonly Counter[];
  }): Promise<TrafficBucketColumns<Counter>> {
    const { organizationId, distributionId, fromMinute, toMinute, granularityMinutes } = input;
    const tiles = (minutes: number) =>
      granularityMinutes % minutes === 0 && fromMinute % minutes === 0 && toMinute % minutes === 0;
    const resolution = RESOLUTIONS.findLast((candidate) => tiles(candidate.minutes)) ?? RESOLUTIONS[0];
    // A distribution's rows all carry its organization: its own key range is the narrower scan.
    const scan: BucketScan =
      distributionId !== undefined
        ? { table: resolution.distribution, scope: "distribution_id", id: distributionId }
        : { table: resolution.organization, scope: "organization_id", id: organizationId };
    const row = await this.#bucketSums.first(this.db, {
      ...scan,
      resolutionMinutes: resolution.minutes,
      fromMinute,
      toMinute,
      granularityMinutes,
      counters: input.counters,
    });
    if (!row) throw new Error("an aggregate query returned no row");
    return JSON.parse(row.json) as TrafficBucketColumns<Counter>;
  }

  // Built and compiled once per table, granularity and set of counters: building it cost more than
  // running it (docs/performance.md, session 7). The granularity is a literal of the text, the
  // scope's id and the range are values.
  readonly #bucketSums = new PreparedQuery<BucketSumsQuery, { json: string }>(
    (value: ValueOf<BucketSumsQuery>, { table, scope, resolutionMinutes, granularityMinutes, counters }) => {
      const bucket = sql<number>`(${sql.ref("minute")} / ${sql.lit(granularityMinutes)})`;
      const inRange = this.db
        .selectFrom(table)
        .where(
          sql.ref(scope),
          "=",
          value((query) => query.id),
        )
        .where(
          "minute",
          ">=",
          value((query) => query.fromMinute),
        )
        .where(
          "minute",
          "<",
          value((query) => query.toMinute),
        );
      // A rollup whose periods are the buckets is read as it is: no grouping.
      const rows =
        resolutionMinutes === granularityMinutes
          ? inRange.select([bucket.as("bucket"), ...counters])
          : inRange
              .select((eb) => [
                bucket.as("bucket"),
                ...counters.map((column) => eb.fn.sum<number>(column).as(column)),
              ])
              .groupBy(bucket);
      // A month at `5m` is 8,640 rows, and either driver spends more CPU making a row object than the
      // store spends finding the row: the store answers one JSON object of one array per column
      // instead, which `JSON.parse` reads into a few arrays of numbers. Its numbers read back exactly
      // as the drivers' would. The aggregates of one query see the rows in the same order, so the
      // arrays line up.
      const columns = ["bucket", ...counters];
      const asJson =
        this.dialect === "postgres"
          ? sql<string>`json_build_object(${sql.join(
              columns.map((column) => sql`${sql.lit(column)}, coalesce(json_agg(${sql.ref(column)}), '[]')`),
            )})`
          : sql<string>`json_object(${sql.join(
              columns.map((column) => sql`${sql.lit(column)}, json_group_array(${sql.ref(column)})`),
            )})`;
      return this.db.selectFrom(rows.as("bucket_rows")).select(asJson.as("json"));
    },
    ({ table, granularityMinutes, counters }) => `${table} ${granularityMinutes} ${counters.join()}`,
  );
}
