import { EventEmitter } from "node:events";
import type { FastifyBaseLogger } from "fastify";
import { type Clock, laterBy, nowIso } from "../clock.ts";
import { timeOrderedUuid } from "../ids.ts";
import type { Executor } from "../store/transactions.ts";
import { logBackgroundFailure, OutageLog } from "../store/unavailable.ts";
import type { JobRepository } from "./repository.ts";

export interface JobContext {
  jobId: string;
  attempt: number;
  /**
   * Pushes the lease forward; long jobs call it so no other worker takes them over. False when the
   * lease had already run out and another run claimed the job: this run should stop, and nothing it
   * records on the job counts any more.
   */
  heartbeat(): Promise<boolean>;
}

// biome-ignore lint/suspicious/noExplicitAny: handlers of different payloads live in one list
export interface JobHandler<P = any> {
  kind: string;
  handle(payload: P, context: JobContext): Promise<void>;
  /** How long a claimed job stays ours without a heartbeat (default 60 s). */
  leaseMs?: number;
  /** At most this many jobs of this kind run at once in one runner (default: the runner's concurrency). */
  concurrency?: number;
  /** Called once when the last attempt failed, to record the failure on the domain's own rows. */
  onGiveUp?(payload: P, error: string): Promise<void>;
  /** The runner is stopping: end the work in hand at once (it is taken up again, not failed). */
  stop?(): void;
  /**
   * The failure is of something the job needs rather than of the job (media storage down): it is
   * tried again later without spending an attempt, for up to `transientPatienceMs` after it was
   * queued, so an outage of minutes does not fail the work for good.
   */
  isTransient?(error: unknown): boolean;
  /** How long after it was queued a job waits out transient failures (default 24 h). */
  transientPatienceMs?: number;
  /**
   * Its failures are of what a customer gave it (an import's source URL answering 503 or not at
   * all), not the platform's: its give-up line is a warn, so error lines stay the operator's to act
   * on. `cumulo_job_runs_total{outcome="failed"}` counts it all the same.
   */
  failsOnCustomerInput?: boolean;
}

/**
 * Durable background work. A job is a row written in the same transaction as the change that needs
 * it, so it exists exactly when that change does; workers claim it from the store.
 */
export class JobQueue {
  readonly #wake = new EventEmitter();

  constructor(
    private readonly repository: JobRepository,
    private readonly clock: Clock,
  ) {}

  async enqueue(
    executor: Executor,
    kind: string,
    payload: unknown,
    options: { delayMs?: number; maxAttempts?: number } = {},
  ): Promise<string> {
    const now = this.clock.now();
    const id = timeOrderedUuid();
    await this.repository.insert(executor, {
      id,
      kind,
      payload: JSON.stringify(payload),
      run_at: laterBy(now, options.delayMs ?? 0).toISOString(),
      max_attempts: options.maxAttempts ?? 5,
      created_at: now.toISOString(),
    });
    return id;
  }

  /** Wakes this process's runner at once; call it after the enqueuing transaction commits. */
  notify(): void {
    this.#wake.emit("wake");
  }

  onWake(listener: () => void): () => void {
    this.#wake.on("wake", listener);
    return () => this.#wake.off("wake", listener);
  }
}

export interface JobRunnerOptions {
  concurrency: number;
  /** Fallback poll, for jobs enqueued by other processes and retries coming due. */
  pollMs: number;
  /** Told how each attempt ended and how long it ran (metrics). */
  onRun?: (kind: string, outcome: "succeeded" | "retried" | "failed", seconds: number) => void;
}

const DEFAULT_LEASE_MS = 60_000;
const retryDelayMs = (attempt: number) => Math.min(60_000, 1000 * 2 ** (attempt - 1));

const TRANSIENT_PATIENCE_MS = 24 * 3600 * 1000;
/** Soon after the job was queued (a blip), then further apart the longer it has waited: 2 s to 1 min. */
const transientDelayMs = (ageMs: number) => Math.min(60_000, Math.max(2000, ageMs / 4));

export class JobRunner {
  readonly #handlers: Map<string, JobHandler>;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #inFlightByKind = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #stopWake: (() => void) | undefined;
  #running = false;
  #ticking = false;
  #tickAgain = false;
  #claiming: Promise<void> | undefined;
  readonly #claimLog: OutageLog;
  private readonly options: JobRunnerOptions;

  constructor(
    private readonly queue: JobQueue,
    private readonly repository: JobRepository,
    handlers: JobHandler[],
    private readonly clock: Clock,
    private readonly logger: FastifyBaseLogger,
    options: Partial<JobRunnerOptions> = {},
  ) {
    this.options = { concurrency: 4, pollMs: 1000, ...options };
    this.#handlers = new Map(handlers.map((handler) => [handler.kind, handler]));
    this.#claimLog = new OutageLog(logger, {
      outage: "job claim failed: store unavailable; logged again once it works",
      back: "job claim works again",
      fault: "job claim failed",
    });
  }

  start(): void {
    if (this.#handlers.size === 0) return;
    this.#running = true;
    this.#stopWake = this.queue.onWake(() => this.#tick());
    this.#timer = setInterval(() => this.#tick(), this.options.pollMs);
    this.#tick();
  }

  /** Stops claiming and waits for the jobs in hand; unfinished ones are retried after their lease. */
  async stop(): Promise<void> {
    this.#running = false;
    clearInterval(this.#timer);
    this.#stopWake?.();
    // A claim under way may still hand out jobs: wait for it before waiting for the jobs in hand.
    await this.#claiming;
    for (const handler of this.#handlers.values()) handler.stop?.();
    await Promise.allSettled([...this.#inFlight]);
  }

  #tick(): void {
    if (!this.#running) return;
    if (this.#ticking) {
      this.#tickAgain = true;
      return;
    }
    this.#ticking = true;
    this.#claiming = this.#claim()
      .then(
        () => this.#claimLog.succeeded(),
        (error: unknown) => this.#claimLog.failed(error),
      )
      .finally(() => {
        this.#ticking = false;
        this.#claiming = undefined;
        if (this.#tickAgain) {
          this.#tickAgain = false;
          this.#tick();
        }
      });
  }

  async #claim(): Promise<void> {
    for (const handler of this.#handlers.values()) {
      if (this.options.concurrency - this.#inFlight.size <= 0) return;
      // A kind with its own limit cannot take every slot (long video jobs must not hold up quick ones).
      const free = Math.min(
        this.options.concurrency - this.#inFlight.size,
        (handler.concurrency ?? this.options.concurrency) - (this.#inFlightByKind.get(handler.kind) ?? 0),
      );
      if (free <= 0) continue;
      // Each kind is claimed with its own lease, so a quick job is taken over quickly after a crash.
      const now = this.clock.now();
      const jobs = await this.repository.claimDue(
        [handler.kind],
        now.toISOString(),
        laterBy(now, handler.leaseMs ?? DEFAULT_LEASE_MS).toISOString(),
        free,
      );
      for (const job of jobs) {
        this.#inFlightByKind.set(handler.kind, (this.#inFlightByKind.get(handler.kind) ?? 0) + 1);
        // The outcome's own write may fail too (the store away, full or read-only): the job is then
        // still claimed, and runs again once its lease runs out. Unhandled, it ended the process.
        const run = this.#run(job)
          .catch((error: unknown) =>
            logBackgroundFailure(
              this.logger,
              error,
              "job's outcome not recorded; it runs again after its lease",
            ),
          )
          .finally(() => {
            this.#inFlight.delete(run);
            this.#inFlightByKind.set(handler.kind, (this.#inFlightByKind.get(handler.kind) ?? 1) - 1);
            this.#tick();
          });
        this.#inFlight.add(run);
      }
    }
  }

  /**
   * A run that ended after its job left it: its lease ran out and another run claimed the job, or
   * developer mode reset the jobs (a state reset or restore). It records nothing.
   */
  #taken(job: { id: string; kind: string; attempts: number }): void {
    this.logger.warn(
      { jobId: job.id, kind: job.kind, attempt: job.attempts },
      "job run ended after another run took its job over (its lease ran out) or the job was removed; its outcome is not kept",
    );
  }

  async #run(job: {
    id: string;
    kind: string;
    payload: string;
    attempts: number;
    max_attempts: number;
    created_at: string;
  }): Promise<void> {
    const handler = this.#handlers.get(job.kind);
    if (!handler) return;
    const leaseMs = handler.leaseMs ?? DEFAULT_LEASE_MS;
    const run = { id: job.id, attempt: job.attempts };
    const context: JobContext = {
      jobId: job.id,
      attempt: job.attempts,
      heartbeat: () => this.repository.extendLease(run, laterBy(this.clock.now(), leaseMs).toISOString()),
    };
    const started = performance.now();
    const ran = (outcome: "succeeded" | "retried" | "failed") =>
      this.options.onRun?.(job.kind, outcome, (performance.now() - started) / 1000);
    try {
      await handler.handle(JSON.parse(job.payload), context);
      if (!(await this.repository.complete(run, nowIso(this.clock)))) {
        this.#taken(job);
        return;
      }
      ran("succeeded");
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (!this.#running) {
        // Ended by this runner's stop: due again at once, for another worker or the next start.
        this.logger.info({ jobId: job.id, kind: job.kind }, "job interrupted by shutdown; queued again");
        await this.repository.reschedule(run, nowIso(this.clock), message, nowIso(this.clock));
        return;
      }
      const ageMs = this.clock.now().getTime() - Date.parse(job.created_at);
      if (handler.isTransient?.(error) && ageMs < (handler.transientPatienceMs ?? TRANSIENT_PATIENCE_MS)) {
        const delayMs = transientDelayMs(ageMs);
        this.logger.warn(
          { err: error, jobId: job.id, kind: job.kind, retryInMs: delayMs },
          "job postponed: something it needs is unavailable",
        );
        ran("retried");
        const runAt = laterBy(this.clock.now(), delayMs).toISOString();
        if (!(await this.repository.postpone(run, runAt, message, nowIso(this.clock)))) this.#taken(job);
        return;
      }
      const fields = { err: error, jobId: job.id, kind: job.kind, attempt: job.attempts };
      if (job.attempts >= job.max_attempts) {
        if (!(await this.repository.fail(run, message, nowIso(this.clock)))) {
          this.#taken(job);
          return;
        }
        ran("failed");
        // A line of its own, at error: the log tells a job that gave up from one tried again.
        const level = handler.failsOnCustomerInput ? "warn" : "error";
        this.logger[level](fields, "job gave up after its last attempt; kept as failed");
        await handler.onGiveUp?.(JSON.parse(job.payload), message);
      } else {
        const retryInMs = retryDelayMs(job.attempts);
        const runAt = laterBy(this.clock.now(), retryInMs).toISOString();
        if (!(await this.repository.reschedule(run, runAt, message, nowIso(this.clock)))) {
          this.#taken(job);
          return;
        }
        ran("retried");
        this.logger.warn({ ...fields, retryInMs }, "job failed; tried again later");
      }
    }
  }
}
