import type { FastifyBaseLogger } from "fastify";
import { CONNECTION_FAILURE_CODES } from "../net/connection-failures.ts";

/*
 * Failures of the store itself rather than of the request: PostgreSQL unreachable, restarting or out
 * of connections, a connection lost mid-query, SQLite's write lock held past the busy timeout or its
 * disk failing. Answered 503 with Retry-After, so clients try again, instead of 500.
 */

/** How long clients are asked to wait after a store failure: a restart or a failover takes seconds. */
export const STORE_RETRY_AFTER_S = 5;

export const STORE_UNAVAILABLE_MESSAGE = "The service is briefly unavailable; try again shortly";

/**
 * PostgreSQL's SQLSTATEs of an unavailable server: connection exceptions (class 08), shutting down
 * or starting (57P01-57P03), insufficient resources (class 53: connections, memory, disk), a
 * server that takes no writes (25006: a standby after a failover, a database set read-only), and a
 * database that takes no connections (55000, given to a new connection while `ALLOW_CONNECTIONS` is
 * off for maintenance; Cumulo's own statements never meet it otherwise).
 */
const UNAVAILABLE_SQLSTATE = /^(?:08|57P0[1-3]|53|25006$|55000$)/;

/** node-postgres's own errors for a lost connection or a connect that timed out; they carry no code. */
const LOST_CONNECTION =
  /^(?:Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/;

/**
 * SQLite: locked past the busy timeout, the disk full or failing, or the file taking no writes (its
 * file system turned read-only, or the file replaced under the process: `SqliteFileGuard`).
 */
const SQLITE_UNAVAILABLE = /^SQLITE_(?:BUSY|LOCKED|FULL|IOERR|READONLY)/;

export function isStoreUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") {
    return (
      CONNECTION_FAILURE_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code) || SQLITE_UNAVAILABLE.test(code)
    );
  }
  return LOST_CONNECTION.test(error.message);
}

/**
 * A background step's failure (a claim, a poll) in the log: a warning while the store is away, which
 * `/readyz` already reports and which ends by itself, an error otherwise.
 */
export function logBackgroundFailure(
  logger: Pick<FastifyBaseLogger, "warn" | "error">,
  error: unknown,
  message: string,
): void {
  if (isStoreUnavailable(error)) logger.warn({ err: error }, message);
  else logger.error({ err: error }, message);
}

/**
 * The failures of a background loop (a worker's claims, the change listener) while the store is away,
 * logged once when they begin and once when the loop works again: a minute's outage wrote a line per
 * try, 88 of one kind on one node, and nothing said when it was over (QA of session 48). Failures
 * that `isOutage` does not take for the store's absence (faults) are logged at `error` each time.
 */
export class OutageLog {
  #failures = 0;

  constructor(
    private readonly logger: Pick<FastifyBaseLogger, "info" | "warn" | "error">,
    /** `fault` names a failure that is no outage; without it, `outage` does. */
    private readonly messages: { outage: string; back: string; fault?: string },
    private readonly isOutage: (error: unknown) => boolean = isStoreUnavailable,
  ) {}

  failed(error: unknown): void {
    if (!this.isOutage(error)) {
      this.logger.error({ err: error }, this.messages.fault ?? this.messages.outage);
      return;
    }
    this.#failures += 1;
    if (this.#failures === 1) this.logger.warn({ err: error }, this.messages.outage);
  }

  succeeded(): void {
    if (this.#failures === 0) return;
    this.logger.info({ failedTries: this.#failures }, this.messages.back);
    this.#failures = 0;
  }
}
