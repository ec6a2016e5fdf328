import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { Clock } from "../clock.ts";
import { ALL_ROLES, type Config, type Role } from "../config.ts";
import { latestMigration } from "../store/migrations/index.ts";
import { API_VERSION } from "../version.ts";
import { type HistogramSeries, observe, TalliedCounter, TalliedHistogram } from "./metric-tallies.ts";

/** Seconds: from a cached API answer (sub-millisecond) to a slow request near its timeout. */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds: one store query, from a prepared SQLite read to a PostgreSQL round trip under load. */
const QUERY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
/** Seconds: background work, from a quick provisioning job to a long transcode. */
const JOB_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600];

const LINT_FAILING_DEFAULTS = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

/**
 * Metrics only one role's work records. A node without that role leaves them out: on a worker or
 * edge node the API's request counters stayed 0 forever, and read as an idle API.
 */
const ROLE_METRICS: Record<Role, readonly string[]> = {
  api: [
    "cumulo_http_requests_total",
    "cumulo_http_request_duration_seconds",
    "cumulo_rate_limit_refusals_total",
  ],
  worker: [
    "cumulo_job_runs_total",
    "cumulo_job_run_duration_seconds",
    "cumulo_webhook_attempts_total",
    "cumulo_webhook_attempt_duration_seconds",
    "cumulo_ffmpeg_runs_total",
    "cumulo_ffmpeg_run_duration_seconds",
  ],
  edge: [
    "cumulo_edge_requests_total",
    "cumulo_edge_sent_bytes_total",
    "cumulo_edge_origin_duration_seconds",
    "cumulo_edge_coalesced_misses_total",
  ],
};

/** How long a scrape reuses what it read from the store, so frequent scrapes cannot load it. */
const STORE_SNAPSHOT_TTL_MS = 5000;
/**
 * How long a scrape waits for the store's figures. Past it the scrape answers without them, with
 * `cumulo_store_up` 0: a store away, or a pool with every connection busy, made `/metrics` answer
 * 500 or time out, so only "node down" could fire, and the pool gauges that tell why went unread
 * (QA of session 48).
 */
const STORE_READ_WAIT_MS = 1000;
/** How long a store read that has not answered is waited on by later scrapes before a new one is made. */
const STORE_READ_GIVE_UP_MS = 30_000;

/** Route label of a request no route matched (404s of unknown paths), so URLs never become labels. */
const UNMATCHED_ROUTE = "unmatched";

export type JobRunOutcome = "succeeded" | "retried" | "failed";
export type WebhookAttemptOutcome = "delivered" | "refused" | "unanswered";
export type MediaToolOutcome = "succeeded" | "failed" | "timed_out";

/** Whether this process serves `/metrics` at all (a listener of its own or a token on the API port). */
export const metricsExposed = (config: Config): boolean =>
  config.metrics.port !== undefined || config.metrics.token !== undefined;

/** What the scrape reads from the store and the connections, wired once the services exist. */
export interface StoreSources {
  clock: Clock;
  /** Kinds of job this deployment runs: each is reported, with 0 when it has no such job. */
  jobKinds: readonly string[];
  jobs: {
    unfinishedByKind(): Promise<
      { kind: string; status: string; count: number; earliest_run_at: string | null }[]
    >;
  };
  webhookBacklog(): Promise<{ state: string; count: number }[]>;
  /** PostgreSQL's pool; absent on SQLite (one connection, no pool). */
  pool: { totalCount: number; idleCount: number; waitingCount: number } | undefined;
  /** ioredis' connection state; absent without Redis. */
  redis: { status: string } | undefined;
  /** The GeoIP database's build time; absent without one. */
  geoipBuiltAt: () => Date | undefined;
}

interface RequestSeries {
  requests: { pending: number };
  duration: HistogramSeries;
}

const statusClass = (status: number): string => `${Math.floor(status / 100)}xx`;

/**
 * This process's Prometheus metrics. What happens on every request or query (API answers, edge
 * answers, store queries) is added to tallies made once per label set (`metric-tallies.ts`), never
 * a label object built per event; what lives in the store is read at scrape time.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly #httpRequests = new TalliedCounter({
    name: "cumulo_http_requests_total",
    help: "API requests answered, by route template, method and status code.",
    labelNames: ["route", "method", "status"] as const,
    registers: [this.registry],
  });
  readonly #httpDuration = new TalliedHistogram({
    name: "cumulo_http_request_duration_seconds",
    help: "Time from receiving an API request to sending its answer, by route template, method and status class.",
    labelNames: ["route", "method", "status_class"] as const,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });
  /** route -> method -> status -> series. */
  readonly #httpSeries = new Map<string, Map<string, Map<number, RequestSeries>>>();
  /** `method route` -> the tally of its 500s, made as the route is (`routeAdded`). */
  readonly #unexpectedFailures = new Map<string, { pending: number }>();
  readonly #rateLimited = new TalliedCounter({
    name: "cumulo_rate_limit_refusals_total",
    help: "API requests refused with 429 because their key (or address) spent its request budget.",
    registers: [this.registry],
  }).tally();
  readonly #jobRuns = new Counter({
    name: "cumulo_job_runs_total",
    help: "Job attempts finished by this process's runner, by kind and outcome (retried: will run again).",
    labelNames: ["kind", "outcome"] as const,
    registers: [this.registry],
  });
  readonly #jobDuration = new Histogram({
    name: "cumulo_job_run_duration_seconds",
    help: "How long one job attempt ran in this process, by kind.",
    labelNames: ["kind"] as const,
    buckets: JOB_BUCKETS,
    registers: [this.registry],
  });
  readonly #webhookAttempts = new Counter({
    name: "cumulo_webhook_attempts_total",
    help: "Webhook delivery attempts sent by this process, by outcome: delivered (2xx), refused (other status), unanswered (no HTTP answer).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly #webhookDuration = new Histogram({
    name: "cumulo_webhook_attempt_duration_seconds",
    help: "How long one webhook delivery attempt took, until the receiver's answer or the failure.",
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });
  readonly #edgeRequests = new TalliedCounter({
    name: "cumulo_edge_requests_total",
    help: "CDN edge answers, by cache status: hit (from the edge cache), miss (from the origin), media (a video library's files, served from media storage and never cached), none (errors, unknown hosts).",
    labelNames: ["cache"] as const,
    registers: [this.registry],
  });
  readonly #edgeHit = this.#edgeRequests.tally("hit");
  readonly #edgeMiss = this.#edgeRequests.tally("miss");
  readonly #edgeMedia = this.#edgeRequests.tally("media");
  readonly #edgeNone = this.#edgeRequests.tally("none");
  readonly #edgeByCache = { HIT: this.#edgeHit, MISS: this.#edgeMiss, MEDIA: this.#edgeMedia };
  readonly #edgeBytes = new TalliedCounter({
    name: "cumulo_edge_sent_bytes_total",
    help: "Body bytes the CDN edge wrote to viewers.",
    registers: [this.registry],
  }).tally();
  readonly #edgeOrigin = new TalliedHistogram({
    name: "cumulo_edge_origin_duration_seconds",
    help: "How long the CDN edge waited on a distribution's HTTP origin for one request, until its body was through, background revalidations (stale-while-revalidate) included (video library files, read from media storage as the viewer downloads them, are not counted).",
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  }).series();
  readonly #edgeCoalesced = new TalliedCounter({
    name: "cumulo_edge_coalesced_misses_total",
    help: "CDN edge misses that waited on another viewer's origin request for the same object instead of asking the origin.",
    registers: [this.registry],
  }).tally();
  readonly #toolRuns = new Counter({
    name: "cumulo_ffmpeg_runs_total",
    help: "ffmpeg and ffprobe runs finished, by tool and outcome.",
    labelNames: ["tool", "outcome"] as const,
    registers: [this.registry],
  });
  readonly #toolDuration = new Histogram({
    name: "cumulo_ffmpeg_run_duration_seconds",
    help: "How long one ffmpeg or ffprobe run took, by tool.",
    labelNames: ["tool"] as const,
    buckets: JOB_BUCKETS,
    registers: [this.registry],
  });
  readonly #queryDuration = new TalliedHistogram({
    name: "cumulo_store_query_duration_seconds",
    help: "How long one store query took, including its wait for a connection.",
    buckets: QUERY_BUCKETS,
    registers: [this.registry],
  }).series();
  readonly #queryErrors = new TalliedCounter({
    name: "cumulo_store_query_errors_total",
    help: "Store queries the store ran and refused, constraint violations included (queries that never reached it are not counted: see cumulo_store_up).",
    registers: [this.registry],
  }).tally();
  #snapshot: { at: number; reading: Promise<StoreSnapshot>; pending: boolean } | undefined;

  /**
   * @param processMetrics also export Node's process metrics (CPU, memory, event loop, GC).
   * @param roles the roles this process runs (default: all): other roles' metrics are left out.
   */
  constructor(options: { processMetrics: boolean; roles?: readonly Role[] }) {
    const roles = options.roles ?? ALL_ROLES;
    for (const role of ALL_ROLES) {
      if (roles.includes(role)) continue;
      for (const name of ROLE_METRICS[role]) this.registry.removeSingleMetric(name);
    }
    // Every outcome's series from the start, at 0: a series born with its first event counted hides
    // that event from rate() and increase(), and a burst of failures after a start went unseen.
    for (const outcome of ["delivered", "refused", "unanswered"])
      this.#webhookAttempts.labels(outcome).inc(0);
    for (const tool of ["ffmpeg", "ffprobe"]) {
      for (const outcome of ["succeeded", "failed", "timed_out"]) this.#toolRuns.labels(tool, outcome).inc(0);
    }
    // Which version and store schema each node runs, for a rolling upgrade:
    // `count by (version, schema) (cumulo_build_info)`.
    new Gauge({
      name: "cumulo_build_info",
      help: "Always 1; its labels are the Cumulo version this process runs and the last store migration it knows.",
      labelNames: ["version", "schema"] as const,
      registers: [this.registry],
    }).set({ version: API_VERSION, schema: latestMigration() }, 1);
    if (options.processMetrics) {
      collectDefaultMetrics({ register: this.registry });
      // Gauges named like counters (Prometheus' lint refuses them); the same figures stay exported
      // by type as nodejs_active_handles, nodejs_active_requests and nodejs_active_resources.
      for (const name of LINT_FAILING_DEFAULTS) this.registry.removeSingleMetric(name);
    }
  }

  httpResponse = (route: string | undefined, method: string, status: number, milliseconds: number): void => {
    const series = this.#requestSeries(route ?? UNMATCHED_ROUTE, method, status);
    series.requests.pending++;
    observe(series.duration, milliseconds / 1000);
  };

  /**
   * A route the API serves: its 500 is exported at 0 from the start, so that rate() and increase()
   * see the first unexpected failure after a start (a deploy's), which a series born with it counted
   * hides. Other codes' series are made as they are first answered: all of them ahead would be
   * thousands of series, and their first answers are expected ones or come in bursts.
   */
  routeAdded = (route: string, method: string): void => {
    this.#unexpectedFailures.set(`${method} ${route}`, this.#httpRequests.tally(route, method, "500"));
  };

  rateLimitRefused = (): void => {
    this.#rateLimited.pending++;
  };

  jobRun = (kind: string, outcome: JobRunOutcome, seconds: number): void => {
    this.#jobRuns.labels(kind, outcome).inc();
    this.#jobDuration.labels(kind).observe(seconds);
  };

  webhookAttempt = (status: number, success: boolean, milliseconds: number): void => {
    const outcome: WebhookAttemptOutcome = success ? "delivered" : status === 0 ? "unanswered" : "refused";
    this.#webhookAttempts.labels(outcome).inc();
    this.#webhookDuration.observe(milliseconds / 1000);
  };

  /**
   * One edge answer; `cacheStatus` is its `X-Cache` (`MEDIA`: a library distribution's answer, never
   * cached), `originMs` set when it waited on the origin.
   */
  edgeResponse = (
    cacheStatus: "HIT" | "MISS" | "MEDIA" | undefined,
    sentBytes: number,
    originMs: number | undefined,
  ): void => {
    (cacheStatus === undefined ? this.#edgeNone : this.#edgeByCache[cacheStatus]).pending++;
    this.#edgeBytes.pending += sentBytes;
    // A library file's time runs until the viewer has downloaded it: a slow viewer of a long video
    // is not a slow origin, and would set off the slow-origin alert.
    if (originMs !== undefined && cacheStatus !== "MEDIA") observe(this.#edgeOrigin, originMs / 1000);
  };

  /**
   * The origin time of a background revalidation (`stale-while-revalidate`): no viewer's answer, but
   * an origin request like a miss's, so the slow-origin alert sees it.
   */
  edgeBackgroundOriginRequest = (originMs: number): void => {
    observe(this.#edgeOrigin, originMs / 1000);
  };

  edgeCoalescedMiss = (): void => {
    this.#edgeCoalesced.pending++;
  };

  mediaToolRun = (tool: "ffmpeg" | "ffprobe", outcome: MediaToolOutcome, seconds: number): void => {
    this.#toolRuns.labels(tool, outcome).inc();
    this.#toolDuration.labels(tool).observe(seconds);
  };

  storeQuery = (milliseconds: number, failed: boolean): void => {
    observe(this.#queryDuration, milliseconds / 1000);
    if (failed) this.#queryErrors.pending++;
  };

  /**
   * Gauges read at scrape time: jobs and webhook backlog from the store (one grouped query each,
   * reused for `STORE_SNAPSHOT_TTL_MS`), the PostgreSQL pool and the Redis connection.
   */
  observe(sources: StoreSources): void {
    const snapshot = () => this.#storeSnapshotInTime(sources);
    const registers = [this.registry];
    for (const kind of sources.jobKinds) {
      for (const outcome of ["succeeded", "retried", "failed"]) this.#jobRuns.labels(kind, outcome).inc(0);
    }
    // Registered first: a scrape reads gauges in this order, so the pool is read before the store
    // snapshot's own queries ask it for connections (they counted as waiting on an idle node).
    const { pool } = sources;
    if (pool) {
      new Gauge({
        name: "cumulo_store_pool_connections",
        help: "PostgreSQL connections of this process's pool, by state: busy (running a query or transaction) or idle.",
        labelNames: ["state"] as const,
        registers,
        collect() {
          this.labels("busy").set(pool.totalCount - pool.idleCount);
          this.labels("idle").set(pool.idleCount);
        },
      });
      new Gauge({
        name: "cumulo_store_pool_waiting_requests",
        help: "Queries of this process waiting for a free PostgreSQL connection.",
        registers,
        collect() {
          this.set(pool.waitingCount);
        },
      });
    }
    new Gauge({
      name: "cumulo_jobs",
      help: "Jobs in the store by kind and state: queued (waiting, retries scheduled for later included), running, failed (gave up; kept until deleted).",
      labelNames: ["kind", "state"] as const,
      registers,
      async collect() {
        const taken = await snapshot();
        this.reset();
        if (!taken) return;
        const { jobs } = taken;
        for (const kind of sources.jobKinds) {
          for (const state of Object.values(JOB_STATES)) this.labels(kind, state).set(0);
        }
        for (const row of jobs) this.labels(row.kind, row.state).set(row.count);
      },
    });
    new Gauge({
      name: "cumulo_jobs_oldest_queued_age_seconds",
      help: "How long the oldest queued job of each kind has been due without being claimed (0 when none is due).",
      labelNames: ["kind"] as const,
      registers,
      async collect() {
        const taken = await snapshot();
        this.reset();
        if (!taken) return;
        const { oldestQueuedAge } = taken;
        for (const kind of sources.jobKinds) this.labels(kind).set(0);
        for (const [kind, age] of oldestQueuedAge) this.labels(kind).set(age);
      },
    });
    new Gauge({
      name: "cumulo_webhook_backlog",
      help: "Webhook delivery attempts not finished, by state: pending (waiting to be sent or retried) or sending (claimed by a worker).",
      labelNames: ["state"] as const,
      registers,
      async collect() {
        const taken = await snapshot();
        this.reset();
        if (!taken) return;
        for (const state of ["pending", "sending"])
          this.labels(state).set(taken.webhookBacklog.get(state) ?? 0);
      },
    });
    new Gauge({
      name: "cumulo_store_up",
      help: "1 when this scrape read the store's figures (jobs, webhook backlog) within 1 s; 0 when the store failed or kept them waiting (away, locked, or every pooled connection busy), and those gauges are left out.",
      registers,
      async collect() {
        this.set((await snapshot()) ? 1 : 0);
      },
    });
    if (sources.geoipBuiltAt()) {
      new Gauge({
        name: "cumulo_geoip_database_build_timestamp_seconds",
        help: "When the GeoIP database in use was built (unix seconds, from its metadata): an old one places viewers where their addresses used to be.",
        registers,
        collect() {
          this.set(Math.floor((sources.geoipBuiltAt()?.getTime() ?? 0) / 1000));
        },
      });
    }
    const { redis } = sources;
    if (redis) {
      new Gauge({
        name: "cumulo_redis_up",
        help: "1 when this process's Redis connection is ready, 0 while it is connecting or lost.",
        registers,
        collect() {
          this.set(redis.status === "ready" ? 1 : 0);
        },
      });
    }
  }

  /** The exposition text, and its content type. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  #requestSeries(route: string, method: string, status: number): RequestSeries {
    let byMethod = this.#httpSeries.get(route);
    if (!byMethod) {
      byMethod = new Map();
      this.#httpSeries.set(route, byMethod);
    }
    let byStatus = byMethod.get(method);
    if (!byStatus) {
      byStatus = new Map();
      byMethod.set(method, byStatus);
    }
    let series = byStatus.get(status);
    if (!series) {
      // Codes of one class share their duration series (200 and 201 are one `2xx` series).
      const sameClass = [...byStatus].find(([code]) => statusClass(code) === statusClass(status))?.[1];
      series = {
        requests:
          (status === 500 ? this.#unexpectedFailures.get(`${method} ${route}`) : undefined) ??
          this.#httpRequests.tally(route, method, String(status)),
        duration:
          sameClass?.duration ??
          this.#httpDuration.series({ route, method, status_class: statusClass(status) }),
      };
      byStatus.set(status, series);
    }
    return series;
  }

  /** The store's figures, or undefined when they failed or did not come within `STORE_READ_WAIT_MS`. */
  async #storeSnapshotInTime(sources: StoreSources): Promise<StoreSnapshot | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), STORE_READ_WAIT_MS);
    });
    const taken = await Promise.race([this.#storeSnapshot(sources).catch(() => undefined), late]);
    clearTimeout(timer);
    return taken;
  }

  #storeSnapshot(sources: StoreSources): Promise<StoreSnapshot> {
    const now = sources.clock.now().getTime();
    // A clock moved back (developer mode) reads again rather than keeping a snapshot from the future.
    const age = this.#snapshot ? now - this.#snapshot.at : Number.POSITIVE_INFINITY;
    const fresh = age >= 0 && age < STORE_SNAPSHOT_TTL_MS;
    // A read still waiting is waited on again, so scrapes of a stuck store pile up no reads; past
    // `STORE_READ_GIVE_UP_MS` it is given up (a connection gone silent may never answer).
    const waiting = this.#snapshot?.pending === true && age >= 0 && age < STORE_READ_GIVE_UP_MS;
    if (this.#snapshot && (fresh || waiting)) return this.#snapshot.reading;
    const reading = readStoreSnapshot(sources, now);
    const snapshot = { at: now, reading, pending: true };
    this.#snapshot = snapshot;
    reading.then(
      () => {
        snapshot.pending = false;
      },
      // A failed read is not kept: the next scrape asks again.
      () => {
        if (this.#snapshot === snapshot) this.#snapshot = undefined;
      },
    );
    return reading;
  }
}

interface StoreSnapshot {
  jobs: { kind: string; state: string; count: number }[];
  oldestQueuedAge: Map<string, number>;
  webhookBacklog: Map<string, number>;
}

const JOB_STATES: Record<string, string> = { pending: "queued", running: "running", failed: "failed" };

async function readStoreSnapshot(sources: StoreSources, now: number): Promise<StoreSnapshot> {
  const [jobRows, backlogRows] = await Promise.all([
    sources.jobs.unfinishedByKind(),
    sources.webhookBacklog(),
  ]);
  const jobs: StoreSnapshot["jobs"] = [];
  const oldestQueuedAge = new Map<string, number>();
  for (const row of jobRows) {
    const state = JOB_STATES[row.status];
    if (!state) continue;
    jobs.push({ kind: row.kind, state, count: row.count });
    if (row.status === "pending" && row.earliest_run_at) {
      oldestQueuedAge.set(row.kind, Math.max(0, (now - Date.parse(row.earliest_run_at)) / 1000));
    }
  }
  return {
    jobs,
    oldestQueuedAge,
    webhookBacklog: new Map(backlogRows.map((row) => [row.state, row.count])),
  };
}
