import type { FastifyBaseLogger } from "fastify";
import { AcknowledgedChannel } from "../acknowledgements.ts";
import { type Bus, unlessBusUnavailable } from "../bus.ts";
import type { Clock } from "../clock.ts";
import type { FieldError } from "../http/errors.ts";
import { TIME_OR_DAY_WORDS } from "../http/schemas.ts";
import type { StoreGeneration } from "../store/database.ts";
import { KeptWhileUnchanged } from "../store/kept-while-unchanged.ts";
import {
  TRAFFIC_COUNTERS,
  type TrafficBucketColumns,
  type TrafficCounter,
  type TrafficCounters,
  type TrafficRepository,
} from "./repository.ts";
import {
  type Analytics,
  type AnalyticsQuery,
  GRANULARITIES,
  type Granularity,
  METRICS,
  type Metric,
} from "./schemas.ts";
import type { CdnService } from "./service.ts";
import type { TrafficMinuteTable } from "./tables.ts";

const MINUTE_MS = 60_000;

/** What asking the origin cost a distribution: its upstream figures. */
export interface OriginTraffic {
  distributionId: string;
  organizationId: string;
  /** Body bytes read from the origin (0 when nothing was asked, or for a 304). */
  upstreamBytes: number;
  /** Time the origin took, when the origin was asked. */
  originTimeMs: number | undefined;
}

/** One response the edge sent, as analytics counts it. */
export interface TrafficEvent extends OriginTraffic {
  status: number;
  /** Body bytes written to the viewer. */
  sentBytes: number;
}

/**
 * Bus channel: a developer-mode reset or snapshot load of the store, or of one organization, is
 * `starting` or `done`. Its own signal, not the caches' drop that a lost Redis connection also runs:
 * counts held in memory are still owed to the store after a reconnect.
 */
const STORE_REPLACEMENT_CHANNEL = "cdn.traffic.store-replacement";
/** How long a reset waits for an edge node that does not say it acted. */
const STORE_REPLACEMENT_ACK_TIMEOUT_MS = 2000;

export interface StoreReplacement {
  stage: "starting" | "done";
  /** One organization's reset; absent for the whole store. */
  organizationId?: string;
}

const emptyCounters = (): TrafficCounters =>
  Object.fromEntries(TRAFFIC_COUNTERS.map((column) => [column, 0])) as unknown as TrafficCounters;

/**
 * Counts edge responses per distribution per minute in memory and adds them to the store every few
 * seconds (and at shutdown). Several edge nodes add to the same rows.
 */
export class TrafficRecorder {
  #pending = new Map<string, TrafficMinuteTable>();
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();
  readonly #replacements: AcknowledgedChannel<StoreReplacement>;

  constructor(
    private readonly repository: TrafficRepository,
    private readonly clock: Clock,
    private readonly logger: FastifyBaseLogger,
    private readonly flushIntervalMs: number,
    bus: Bus,
  ) {
    this.#replacements = new AcknowledgedChannel(
      bus,
      STORE_REPLACEMENT_CHANNEL,
      STORE_REPLACEMENT_ACK_TIMEOUT_MS,
    );
  }

  /** Counts a response sent to a viewer, with what asking the origin for it cost. */
  record(event: TrafficEvent): void {
    const row = this.#rowOf(event);
    row.requests += 1;
    row.sent_bytes += event.sentBytes;
    this.#addOriginTraffic(row, event);
    const statusClass = Math.floor(event.status / 100);
    if (statusClass === 2) row.responses_2xx += 1;
    else if (statusClass === 3) row.responses_3xx += 1;
    else if (statusClass === 4) row.responses_4xx += 1;
    else if (statusClass === 5) row.responses_5xx += 1;
  }

  /**
   * Counts an origin request that answered no viewer (a background revalidation): its bytes and time
   * are the distribution's upstream traffic, but it is no request and has no status of a viewer's.
   */
  recordOriginOnly(traffic: OriginTraffic): void {
    if (traffic.originTimeMs === undefined) return; // the origin was never asked
    this.#addOriginTraffic(this.#rowOf(traffic), traffic);
  }

  /** The pending row of the distribution and the current minute. */
  #rowOf({ distributionId, organizationId }: OriginTraffic): TrafficMinuteTable {
    const minute = Math.floor(this.clock.now().getTime() / MINUTE_MS);
    const key = `${distributionId}|${minute}`;
    let row = this.#pending.get(key);
    if (!row) {
      row = { distribution_id: distributionId, organization_id: organizationId, minute, ...emptyCounters() };
      this.#pending.set(key, row);
    }
    return row;
  }

  #addOriginTraffic(row: TrafficMinuteTable, traffic: OriginTraffic): void {
    row.upstream_bytes += traffic.upstreamBytes;
    if (traffic.originTimeMs !== undefined) {
      row.origin_time_ms += Math.round(traffic.originTimeMs);
      row.origin_fetches += 1;
    }
  }

  /** Writes everything counted so far; counts that fail to be written are kept for the next flush. */
  flush(): Promise<void> {
    this.#flushing = this.#flushing.then(async () => {
      if (this.#pending.size === 0) return;
      const batch = this.#pending;
      this.#pending = new Map();
      try {
        await this.repository.add([...batch.values()]);
      } catch (error) {
        this.logger.warn({ err: error }, "cdn traffic flush failed; will retry");
        for (const [key, row] of batch) {
          const newer = this.#pending.get(key);
          if (newer) for (const column of TRAFFIC_COUNTERS) newer[column] += row[column];
          else this.#pending.set(key, row);
        }
      }
    });
    return this.#flushing;
  }

  /**
   * Tells every edge node's recorder of a developer-mode reset or load, so that traffic served before
   * it never shows after it, and resolves once each has acted (2 s at most for one that does not
   * answer). `starting`, sent before the change: each writes what it holds, and the change removes
   * it with the rest (a periodic write already under way would otherwise land after the change).
   * `done`, sent once the change is committed: each drops what it counted meanwhile for what was
   * replaced. With Redis away this node's recorder has acted, and the others are not waited for.
   */
  async announceReplacement(replacement: StoreReplacement): Promise<void> {
    await this.#replacements.send(replacement).catch(unlessBusUnavailable);
  }

  /** An edge node's side of `announceReplacement`. */
  listen(): Promise<void> {
    return this.#replacements.serve(({ stage, organizationId }) =>
      stage === "starting" ? this.flush() : this.#discard(organizationId),
    );
  }

  /** Drops the counts not yet written (of one organization, or all), after any write under way. */
  #discard(organizationId: string | undefined): Promise<void> {
    this.#flushing = this.#flushing.then(() => {
      if (organizationId === undefined) this.#pending = new Map();
      else {
        for (const [key, row] of this.#pending) {
          if (row.organization_id === organizationId) this.#pending.delete(key);
        }
      }
    });
    return this.#flushing;
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.flush(), this.flushIntervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }
}

const GRANULARITY_MINUTES: Record<Granularity, number> = {
  "1m": 1,
  "5m": 5,
  "15m": 15,
  "1h": 60,
  "6h": 360,
  "1d": 1440,
};
export const MAX_BUCKETS = 10_000;
const DEFAULT_RANGE_MS = 24 * 60 * MINUTE_MS;

// ISO 8601 date or date-time; a time without an offset is UTC.
const ISO_TIME =
  /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

/**
 * A time given in the query, in milliseconds. Date.parse drops digits finer than a millisecond;
 * `laterMillisecond` takes a time between two milliseconds as the later one (the range's end), else as
 * the earlier one (its start, so the bucket holding it is the first).
 */
function parseTime(raw: string, laterMillisecond: boolean): number | undefined {
  // An unencoded "+" in a query string arrives as a space: "10:00:00 02:00" means "+02:00".
  const given = raw.trim().replace(/(T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?) (\d{2}(?::?\d{2})?)$/i, "$1+$2");
  const match = ISO_TIME.exec(given);
  if (!match) return undefined;
  // Date.parse rolls a day past the month's end over ("02-30" is March 2); such a date is no date.
  const [year, month, day] = given.slice(0, 10).split("-").map(Number) as [number, number, number];
  if (day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return undefined;
  let text = given.replace(" ", "T");
  if (text.length > 10 && match[1] === undefined) text += "Z";
  // ISO 8601 allows an offset of whole hours ("-05"); Date.parse takes it only with minutes.
  else if (match[1]?.length === 3) text += ":00";
  const value = Date.parse(text);
  if (Number.isNaN(value)) return undefined;
  return laterMillisecond && /\.\d{3}\d*[1-9]/.test(text) ? value + 1 : value;
}

const DAY_MINUTES = 1440;
/** "HH:MM:00.000Z" of every minute of a UTC day, as `toISOString` writes it. */
const TIMES_OF_DAY = Array.from({ length: DAY_MINUTES }, (_, minute) =>
  new Date(minute * MINUTE_MS).toISOString().slice("1970-01-01T".length),
);

/**
 * `new Date(minute * MINUTE_MS).toISOString()` for a fraction of the cost: the date of the day last
 * asked for is kept, so buckets in order format each day once and join it to a time of day (one
 * `toISOString` per bucket was most of the fill's CPU for a month at `5m`, 8,640 buckets).
 */
function bucketTimestamps(): (minute: number) => string {
  let day = Number.NaN;
  let date = "";
  return (minute) => {
    const minuteDay = Math.floor(minute / DAY_MINUTES);
    if (minuteDay !== day) {
      day = minuteDay;
      const iso = new Date(day * DAY_MINUTES * MINUTE_MS).toISOString();
      date = iso.slice(0, iso.indexOf("T") + 1);
    }
    return date + TIMES_OF_DAY[minute - minuteDay * DAY_MINUTES];
  };
}

export type AnalyticsOutcome =
  | { outcome: "ok"; analytics: Analytics }
  | { outcome: "invalid"; errors: FieldError[] }
  | { outcome: "not_found" };

/** Only the counters a query's metrics read are summed; the others are absent. */
type Sums = TrafficBucketColumns<TrafficCounter>;
/** A metric's value in the bucket whose sums are at `at` in the columns. */
type MetricValue = (sums: Sums, at: number) => number;

/** How each metric is computed from the bucket sums of its counters; a bucket without traffic is 0. */
const METRIC_SOURCES: { [M in Metric]: { counters: readonly TrafficCounter[]; value: MetricValue } } = {
  requests: { counters: ["requests"], value: (sums, at) => sums.requests[at] },
  traffic: { counters: ["sent_bytes"], value: (sums, at) => sums.sent_bytes[at] },
  cache_hit_traffic_ratio: {
    counters: ["sent_bytes", "upstream_bytes"],
    value: (sums, at) => {
      const sent = sums.sent_bytes[at];
      return sent > 0 ? Math.min(1, Math.max(0, 1 - sums.upstream_bytes[at] / sent)) : 0;
    },
  },
  upstream_origin_time_ms: {
    counters: ["origin_time_ms", "origin_fetches"],
    value: (sums, at) => {
      const fetches = sums.origin_fetches[at];
      return fetches > 0 ? sums.origin_time_ms[at] / fetches : 0;
    },
  },
  responses_2xx: { counters: ["responses_2xx"], value: (sums, at) => sums.responses_2xx[at] },
  responses_3xx: { counters: ["responses_3xx"], value: (sums, at) => sums.responses_3xx[at] },
  responses_4xx: { counters: ["responses_4xx"], value: (sums, at) => sums.responses_4xx[at] },
  responses_5xx: { counters: ["responses_5xx"], value: (sums, at) => sums.responses_5xx[at] },
};

/** An analytics query whose parameters passed: its range in epoch ms, and its buckets. */
interface CheckedQuery {
  outcome: "checked";
  from: number;
  to: number;
  metrics: Metric[];
  granularity: Granularity;
  stepMinutes: number;
  firstBucket: number;
  bucketCount: number;
}

/** What a query's buckets are made from, besides the organization and the stored traffic. */
interface BucketRange {
  hostname: string | undefined;
  metrics: Metric[];
  stepMinutes: number;
  firstBucket: number;
  bucketCount: number;
}

type Buckets = { outcome: "ok"; data: Analytics["Data"] } | { outcome: "not_found" };

const keyOf = (organizationId: string, range: BucketRange): string =>
  [
    organizationId,
    range.hostname ?? "*",
    range.metrics.join(","),
    range.stepMinutes,
    range.firstBucket,
    range.bucketCount,
  ].join("\u0000");

// A bucket with every metric, as objects in memory, with room to spare.
const BUCKET_BYTES = 256;

/**
 * The analytics query: validated parameters, aligned zero-filled buckets. An answer reads the clock
 * (its `To` is now, to the millisecond) so it is never kept whole; its buckets are kept instead, by
 * organization, range and metrics, while nothing stored changes.
 */
export class AnalyticsService {
  readonly #kept: KeptWhileUnchanged<Buckets> | undefined;

  constructor(
    private readonly traffic: TrafficRepository,
    private readonly cdn: CdnService,
    private readonly clock: Clock,
    /** The store's generation with the traffic rollups' changes, when answers may be kept (CUMULO_KEPT_ANSWERS). */
    generation?: StoreGeneration,
  ) {
    this.#kept =
      generation &&
      new KeptWhileUnchanged<Buckets>(generation, {
        maxBytes: 32 * 1024 * 1024,
        maxEntryBytes: 4 * 1024 * 1024,
        bytesOf: (buckets) => (buckets.outcome === "ok" ? buckets.data.length * BUCKET_BYTES : BUCKET_BYTES),
      });
  }

  async query(organizationId: string, query: AnalyticsQuery): Promise<AnalyticsOutcome> {
    const checked = this.check(query);
    if (checked.outcome === "invalid") return checked;
    const { from, to, metrics, granularity, stepMinutes, firstBucket, bucketCount } = checked;
    const hostname = query.distribution?.trim().toLowerCase() || undefined; // empty = omitted
    const range: BucketRange = { hostname, metrics, stepMinutes, firstBucket, bucketCount };
    const buckets = this.#kept
      ? await this.#kept.get(keyOf(organizationId, range), () => this.#buckets(organizationId, range))
      : await this.#buckets(organizationId, range);
    if (buckets.outcome === "not_found") return buckets;
    return {
      outcome: "ok",
      analytics: {
        From: new Date(from).toISOString(),
        To: new Date(to).toISOString(),
        Metrics: metrics,
        Granularity: granularity,
        Distribution: hostname ?? "*",
        // Kept buckets are shared by every answer for their range: read, never changed.
        Data: buckets.data,
      },
    };
  }

  /** The query's parameters checked together, every failing one reported, and what they ask for. */
  check(query: AnalyticsQuery): { outcome: "invalid"; errors: FieldError[] } | CheckedQuery {
    const errors: FieldError[] = [];

    const requested = (query.metrics ?? [])
      .flatMap((value) => value.split(","))
      .map((value) => value.trim())
      .filter((value) => value !== "");
    const unknown = requested.filter((value) => !(METRICS as readonly string[]).includes(value));
    if (unknown.length > 0) {
      errors.push({
        field: "metrics",
        code: "validation_enum",
        message: `The metrics field must be one of: ${METRICS.join(", ")}; ${unknown.join(", ")} ${unknown.length === 1 ? "is" : "are"} not.`,
      });
    }
    const metrics = (requested.length > 0 ? [...new Set(requested)] : [...METRICS]) as Metric[];

    const granularity = (query.granularity ?? "1h") as Granularity;
    const granularityKnown = (GRANULARITIES as readonly string[]).includes(granularity);
    if (!granularityKnown) {
      errors.push({
        field: "granularity",
        code: "validation_enum",
        message: `The granularity field must be one of: ${GRANULARITIES.join(", ")}.`,
      });
    }

    const to = query.to === undefined ? this.clock.now().getTime() : parseTime(query.to, true);
    if (to === undefined) {
      errors.push({
        field: "to",
        code: "validation_format",
        message: `The to field has an invalid format. It must be ${TIME_OR_DAY_WORDS}.`,
      });
    }
    let from: number | undefined;
    if (query.from !== undefined) {
      from = parseTime(query.from, false);
      if (from === undefined) {
        errors.push({
          field: "from",
          code: "validation_format",
          message: `The from field has an invalid format. It must be ${TIME_OR_DAY_WORDS}.`,
        });
      }
    } else if (to !== undefined) {
      from = to - DEFAULT_RANGE_MS;
    }
    if (from !== undefined && to !== undefined && from >= to) {
      errors.push({ field: "to", code: "validation_min", message: "The to field must be after from." });
    }

    const stepMinutes = granularityKnown ? GRANULARITY_MINUTES[granularity] : undefined;
    let firstBucket = 0;
    let bucketCount = 0;
    if (from !== undefined && to !== undefined && from < to && stepMinutes !== undefined) {
      const stepMs = stepMinutes * MINUTE_MS;
      firstBucket = Math.floor(from / stepMs);
      // every bucket that starts before `to`
      bucketCount = Math.ceil(to / stepMs) - firstBucket;
      if (bucketCount > MAX_BUCKETS) {
        errors.push({
          field: "granularity",
          code: "validation_max",
          message: `The granularity field is too fine for this range: it gives ${bucketCount} buckets, at most ${MAX_BUCKETS} are allowed.`,
        });
      }
    }
    if (errors.length > 0 || from === undefined || to === undefined || stepMinutes === undefined) {
      return { outcome: "invalid", errors };
    }
    return { outcome: "checked", from, to, metrics, granularity, stepMinutes, firstBucket, bucketCount };
  }

  /** The buckets of a range: made only from stored data, so they can be kept while it is unchanged. */
  async #buckets(organizationId: string, range: BucketRange): Promise<Buckets> {
    const { hostname, metrics, stepMinutes, firstBucket, bucketCount } = range;
    let distributionId: string | undefined;
    if (hostname !== undefined) {
      const distribution = await this.cdn.findByHostname(organizationId, hostname);
      if (!distribution) return { outcome: "not_found" };
      distributionId = distribution.id;
    }

    const sums = await this.traffic.sumByBucket({
      organizationId,
      distributionId,
      fromMinute: firstBucket * stepMinutes,
      toMinute: (firstBucket + bucketCount) * stepMinutes,
      granularityMinutes: stepMinutes,
      counters: [...new Set(metrics.flatMap((metric) => METRIC_SOURCES[metric].counters))],
    });
    // Where each bucket's sums are in the columns; -1 for a bucket without traffic.
    const sumsAt = new Int32Array(bucketCount).fill(-1);
    sums.bucket.forEach((bucket, at) => {
      sumsAt[bucket - firstBucket] = at;
    });
    const values = metrics.map((metric) => METRIC_SOURCES[metric].value);
    const data: Analytics["Data"] = new Array(bucketCount);
    const timestamp = bucketTimestamps();
    for (let index = 0; index < bucketCount; index++) {
      const at = sumsAt[index];
      const entry: Record<string, string | number> = {
        Timestamp: timestamp((firstBucket + index) * stepMinutes),
      };
      for (let metric = 0; metric < metrics.length; metric++) {
        entry[metrics[metric]] = at < 0 ? 0 : values[metric](sums, at);
      }
      data[index] = entry as Analytics["Data"][number];
    }
    return { outcome: "ok", data };
  }
}
