import type { FastifyBaseLogger } from "fastify";
import type { Clock } from "../clock.ts";
import { PeriodicWorker } from "./periodic.ts";

/** One kind of row the store sheds once it is older than `keepMs`. */
export interface PruneTask {
  name: string;
  keepMs: number;
  /** Deletes what is older than `before`; returns how many rows went. */
  prune(before: Date): Promise<number>;
}

const HOUR_MS = 60 * 60 * 1000;

/**
 * Keeps the store from growing without bound: on start and then hourly, each task deletes what has
 * outlived its retention. Every worker node runs it; the deletes are idempotent, so nodes that run
 * at once only repeat each other's work.
 */
export class Housekeeper extends PeriodicWorker {
  readonly name = "housekeeping";

  constructor(
    private readonly tasks: PruneTask[],
    private readonly clock: Clock,
    private readonly logger: FastifyBaseLogger,
    intervalMs = HOUR_MS,
  ) {
    super(intervalMs);
  }

  protected pass(): Promise<void> {
    return this.runOnce();
  }

  /** Runs every task once; a failing task is logged and does not stop the others. */
  async runOnce(): Promise<void> {
    const now = this.clock.now().getTime();
    for (const task of this.tasks) {
      try {
        const removed = await task.prune(new Date(now - task.keepMs));
        if (removed > 0) this.logger.info({ task: task.name, removed }, "housekeeping removed old rows");
      } catch (error) {
        this.logger.warn({ err: error, task: task.name }, "housekeeping task failed");
      }
    }
  }
}
