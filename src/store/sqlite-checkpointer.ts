import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/**
 * Runs SQLite's WAL checkpoints on a worker thread with a connection of its own, so that the event
 * loop's connection never waits for one (a checkpoint copies the WAL into the database and syncs
 * it; on a busy store one took up to 433 ms of the event loop, docs/performance.md, session 4).
 * Plain JavaScript evaluated in the worker: it needs only the driver, not the TypeScript loader.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma("busy_timeout = 5000");
const checkpoint = () => {
  try {
    db.pragma("wal_checkpoint(PASSIVE)");
  } catch {
    // Busy or locked: the next turn tries again, and the event loop's connection still
    // checkpoints by itself once the WAL passes its own, higher limit.
  }
};
const timer = setInterval(checkpoint, workerData.intervalMs);
parentPort.once("message", () => {
  clearInterval(timer);
  checkpoint();
  db.close();
  parentPort.close();
});
`;

/** Pages the WAL may reach before the event loop's connection checkpoints by itself (a fallback). */
export const FALLBACK_CHECKPOINT_PAGES = 10_000;

export class SqliteCheckpointer {
  readonly #worker: Worker;
  readonly #exited: Promise<void>;

  constructor(file: string, intervalMs = 200) {
    const driver = createRequire(import.meta.url).resolve("better-sqlite3");
    this.#worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { driver, file, intervalMs } });
    // It must never keep the process alive, nor take it down.
    this.#worker.unref();
    this.#worker.on("error", () => {});
    this.#exited = new Promise((resolve) => this.#worker.once("exit", () => resolve()));
  }

  /** Runs a last checkpoint and closes the worker's connection. */
  async stop(): Promise<void> {
    // Referenced again while it finishes, or a process with nothing else to do would not wait for it.
    this.#worker.ref();
    this.#worker.postMessage("stop");
    await this.#exited;
  }
}
