import { setImmediate } from "node:timers/promises";
import type { Kysely } from "kysely";
import type { DialectName } from "../store/database.ts";
import type { Database } from "../store/tables.ts";
import type { Executor } from "../store/transactions.ts";
import type { JobStatus } from "./tables.ts";

export interface NewJob {
  id: string;
  kind: string;
  payload: string;
  run_at: string;
  max_attempts: number;
  created_at: string;
}

/** One run of a job: the job and the attempt its claim gave it. */
export interface JobRun {
  id: string;
  attempt: number;
}

export class JobRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
  ) {}

  async insert(executor: Executor, job: NewJob): Promise<void> {
    await executor
      .insertInto("jobs")
      .values({
        ...job,
        status: "pending",
        attempts: 0,
        locked_until: null,
        last_error: null,
        updated_at: job.created_at,
      })
      .execute();
  }

  /**
   * Claims due jobs, and jobs whose lease ran out (their worker died), for `leaseMs`. On PostgreSQL
   * `SKIP LOCKED` keeps concurrent workers off each other's rows; SQLite has one writer.
   */
  claimDue(kinds: string[], now: string, leaseUntil: string, limit: number) {
    return this.db.transaction().execute(async (trx) => {
      const due = await trx
        .selectFrom("jobs")
        .select("id")
        .where("kind", "in", kinds)
        .where((eb) =>
          eb.or([
            eb.and([eb("status", "=", "pending"), eb("run_at", "<=", now)]),
            eb.and([eb("status", "=", "running"), eb("locked_until", "<", now)]),
          ]),
        )
        .orderBy("run_at")
        .limit(limit)
        .$if(this.dialect === "postgres", (qb) => qb.forUpdate().skipLocked())
        .execute();
      if (due.length === 0) return [];
      return trx
        .updateTable("jobs")
        .set((eb) => ({
          status: "running",
          attempts: eb("attempts", "+", 1),
          locked_until: leaseUntil,
          updated_at: now,
        }))
        .where(
          "id",
          "in",
          due.map((row) => row.id),
        )
        .returningAll()
        .execute();
    });
  }

  /**
   * The job's row while `run` still holds it: running, in the attempt the run was given. A run whose
   * lease ran out (its process stalled) and whose job another run claimed again no longer matches,
   * so what it records afterwards changes nothing. Attempt 0 is the process that queued the job
   * carrying it out at once (a file removal), while no run has claimed it.
   */
  #held(run: JobRun) {
    return this.db
      .updateTable("jobs")
      .where("id", "=", run.id)
      .where("attempts", "=", run.attempt)
      .where("status", "=", run.attempt === 0 ? "pending" : "running");
  }

  /** Each of these is false when `run` no longer holds its job (nothing is changed then). */
  async complete(run: JobRun, now: string): Promise<boolean> {
    const result = await this.#held(run)
      .set({ status: "done", locked_until: null, updated_at: now })
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async reschedule(run: JobRun, runAt: string, error: string, now: string): Promise<boolean> {
    const result = await this.#held(run)
      .set({ status: "pending", run_at: runAt, locked_until: null, last_error: error, updated_at: now })
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /** `reschedule`, giving back the attempt this run took. */
  async postpone(run: JobRun, runAt: string, error: string, now: string): Promise<boolean> {
    const result = await this.#held(run)
      .set((eb) => ({
        status: "pending",
        attempts: eb("attempts", "-", 1),
        run_at: runAt,
        locked_until: null,
        last_error: error,
        updated_at: now,
      }))
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async fail(run: JobRun, error: string, now: string): Promise<boolean> {
    const result = await this.#held(run)
      .set({ status: "failed", locked_until: null, last_error: error, updated_at: now })
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /** Deletes jobs that finished successfully before `before` (failed ones stay for diagnosis). */
  async pruneDone(before: string, batchSize = 1000): Promise<number> {
    let removed = 0;
    for (;;) {
      const result = await this.db
        .deleteFrom("jobs")
        .where("id", "in", (eb) =>
          eb
            .selectFrom("jobs")
            .select("id")
            .where("status", "=", "done")
            .where("updated_at", "<", before)
            .limit(batchSize),
        )
        .executeTakeFirst();
      const deleted = Number(result.numDeletedRows);
      removed += deleted;
      if (deleted < batchSize) return removed;
      // On SQLite statements run inside the process: requests are answered between batches.
      await setImmediate();
    }
  }

  /**
   * Jobs not done, by kind and status, with the earliest `run_at` of each group: one grouped scan of
   * the (status, run_at) index, for the metrics scrape.
   */
  async unfinishedByKind(): Promise<
    { kind: string; status: JobStatus; count: number; earliest_run_at: string | null }[]
  > {
    return this.db
      .selectFrom("jobs")
      .select((eb) => [
        "kind",
        "status",
        eb.fn.countAll<number>().as("count"),
        eb.fn.min("run_at").as("earliest_run_at"),
      ])
      .where("status", "in", ["pending", "running", "failed"])
      .groupBy(["kind", "status"])
      .execute();
  }

  async extendLease(run: JobRun, leaseUntil: string): Promise<boolean> {
    const result = await this.#held(run).set({ locked_until: leaseUntil }).executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }
}
