import { type Insertable, type Kysely, sql, type Transaction } from "kysely";
import type { Page } from "../http/pagination.ts";
import { selectPage } from "../store/paging.ts";
import type { Database } from "../store/tables.ts";
import { type Executor, isUniqueViolation } from "../store/transactions.ts";
import type { DistributionChanges, DistributionRow, PurgeTable, TrafficMinuteTable } from "./tables.ts";

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
      .set(changes)
      .where("organization_id", "=", organizationId)
      .where("id", "=", id)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
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

export interface TrafficBucketRow extends TrafficCounters {
  /** Index of the bucket from the epoch: bucket start = bucket * granularity minutes. */
  bucket: number;
}

/** Per-minute traffic rollups: added to by every edge node, read by the analytics query. */
export class TrafficRepository {
  constructor(readonly db: Kysely<Database>) {}

  /** Adds the counters to their minute rows and hour rows (creating them), in one transaction. */
  async add(rows: TrafficMinuteTable[]): Promise<void> {
    if (rows.length === 0) return;
    const hours = new Map<string, TrafficMinuteTable>();
    for (const row of rows) {
      const minute = Math.floor(row.minute / 60) * 60;
      const key = `${row.distribution_id}|${minute}`;
      const hour = hours.get(key);
      if (!hour) hours.set(key, { ...row, minute });
      else for (const column of TRAFFIC_COUNTERS) hour[column] += row[column];
    }
    await this.db.transaction().execute(async (trx) => {
      await this.#upsertAdd(trx, "cdn_traffic_minutes", rows);
      await this.#upsertAdd(trx, "cdn_traffic_hours", [...hours.values()]);
    });
  }

  async #upsertAdd(
    trx: Transaction<Database>,
    table: "cdn_traffic_minutes" | "cdn_traffic_hours",
    rows: TrafficMinuteTable[],
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
        .onConflict((conflict) => conflict.columns(["distribution_id", "minute"]).doUpdateSet(added))
        .execute();
    }
  }

  /** Deletes minute rollups before `beforeMinute` (hour rollups stay); returns how many went. */
  async pruneMinutesBefore(beforeMinute: number): Promise<number> {
    let removed = 0;
    // At most a day of rollups per statement keeps each delete, and the locks it holds, short.
    for (;;) {
      const oldest = await this.db
        .selectFrom("cdn_traffic_minutes")
        .select((eb) => eb.fn.min("minute").as("minute"))
        .executeTakeFirst();
      if (oldest?.minute == null || Number(oldest.minute) >= beforeMinute) return removed;
      const result = await this.db
        .deleteFrom("cdn_traffic_minutes")
        .where("minute", "<", Math.min(beforeMinute, Number(oldest.minute) + 24 * 60))
        .executeTakeFirst();
      removed += Number(result.numDeletedRows);
    }
  }

  /**
   * Sums the minutes in [fromMinute, toMinute) per bucket of `granularityMinutes`, for one
   * distribution (already known to be the organization's) or for all of an organization's.
   * Hour-aligned ranges and buckets read the hourly table (60 times fewer rows).
   */
  async sumByBucket(input: {
    organizationId: string;
    distributionId: string | undefined;
    fromMinute: number;
    toMinute: number;
    granularityMinutes: number;
  }): Promise<TrafficBucketRow[]> {
    const { organizationId, distributionId, fromMinute, toMinute, granularityMinutes } = input;
    const hourly = granularityMinutes % 60 === 0 && fromMinute % 60 === 0 && toMinute % 60 === 0;
    let query = this.db
      .selectFrom(hourly ? "cdn_traffic_hours" : "cdn_traffic_minutes")
      .where("minute", ">=", fromMinute)
      .where("minute", "<", toMinute);
    // A distribution's rows all carry its organization: its own key range is the narrower scan.
    query =
      distributionId !== undefined
        ? query.where("distribution_id", "=", distributionId)
        : query.where("organization_id", "=", organizationId);
    const bucket = sql<number>`(${sql.ref("minute")} / ${sql.lit(granularityMinutes)})`;
    const rows = await query
      .select((eb) => [
        bucket.as("bucket"),
        ...TRAFFIC_COUNTERS.map((column) => eb.fn.sum<number>(column).as(column)),
      ])
      .groupBy(bucket)
      .execute();
    return rows.map((row) => {
      const out = { bucket: Number(row.bucket) } as TrafficBucketRow;
      for (const column of TRAFFIC_COUNTERS) out[column] = Number(row[column] ?? 0);
      return out;
    });
  }
}
