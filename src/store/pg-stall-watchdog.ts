import pg from "pg";
import { CONNECTION_FAILURE_CODES } from "../net/connection-failures.ts";

/**
 * Cuts the connections to a PostgreSQL server that no longer answers at all (a frozen server, a
 * network that drops packets without a reset): without it a query sent there waited forever, and with
 * it the request that sent it and the node's shutdown (session 59: a request still unanswered after
 * 25 s, a SIGTERM after 40 s). A query unanswered for `timeoutMs` has a fresh connection sent
 * `select 1`: when that gets no answer within `timeoutMs` too (or cannot reach the server), every
 * connection watched is cut, idle ones too (they lead to the same server), and the queries waiting
 * on them fail as on a lost connection (answered 503 with Retry-After); the pool connects anew. A
 * server that answers the probe, even with an error, is busy, not gone: long queries and lock waits
 * are left alone.
 */
export class PgStallWatchdog {
  /** Connections watched, until they end. */
  readonly #clients = new Set<pg.Client>();
  /** Queries waiting for an answer: when each was sent, by connection. */
  readonly #waiting = new Map<pg.Client, Set<number>>();
  #timer: NodeJS.Timeout | undefined;
  #probing: Promise<void> | undefined;
  #closed = false;

  constructor(
    private readonly connectionString: string,
    /** The node's connect timeout: how long a query may wait, and how long the probe may take. */
    private readonly timeoutMs: number,
  ) {}

  /** Watches every query `client` is sent from now on (cursors excepted: they are read on demand). */
  watch(client: pg.Client): void {
    this.#clients.add(client);
    client.once("end", () => this.#clients.delete(client));
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    client.query = ((...args: unknown[]) => {
      const result = query(...args);
      if (result instanceof Promise) this.#track(client, result);
      return result;
    }) as typeof client.query;
  }

  /** Stops checking; a probe under way still finishes. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }

  #track(client: pg.Client, query: Promise<unknown>): void {
    const sentAt = performance.now();
    const sent = this.#waiting.get(client) ?? new Set<number>();
    sent.add(sentAt);
    this.#waiting.set(client, sent);
    const answered = () => {
      sent.delete(sentAt);
      if (sent.size === 0) this.#waiting.delete(client);
    };
    query.then(answered, answered);
    this.#checkIn(this.timeoutMs);
  }

  #checkIn(delayMs: number): void {
    if (this.#timer !== undefined || this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#check();
    }, delayMs);
    this.#timer.unref();
  }

  /** Probes when a query has waited `timeoutMs`; checks again while any query waits. */
  #check(): void {
    if (this.#waiting.size === 0 || this.#closed) return;
    const now = performance.now();
    const oldest = Math.min(...[...this.#waiting.values()].map((sent) => Math.min(...sent)));
    const stalledBefore = now - this.timeoutMs;
    if (oldest > stalledBefore) {
      this.#checkIn(oldest - stalledBefore);
      return;
    }
    this.#probing ??= this.#probe(stalledBefore).finally(() => {
      this.#probing = undefined;
      this.#checkIn(this.timeoutMs);
    });
  }

  /** Cuts every connection if the server does not answer and a query sent before `stalledBefore` still waits. */
  async #probe(stalledBefore: number): Promise<void> {
    if (!(await this.#unreachable())) return;
    // Answered meanwhile (a process paused by a loaded machine reads its answers late): not gone.
    const stillWaiting = [...this.#waiting.values()].some((sent) => Math.min(...sent) <= stalledBefore);
    if (!stillWaiting) return;
    // Their queries fail with "Connection terminated unexpectedly"; idle pool connections are dropped.
    for (const client of this.#clients) client.connection.stream.destroy();
  }

  async #unreachable(): Promise<boolean> {
    const probe = new pg.Client({
      connectionString: this.connectionString,
      connectionTimeoutMillis: this.timeoutMs,
      query_timeout: this.timeoutMs,
    });
    probe.on("error", () => {});
    try {
      await probe.connect();
      await probe.query("select 1");
      return false;
    } catch (error) {
      return !isAnswer(error);
    } finally {
      void probe.end().catch(() => {});
    }
  }
}

/** Whether the probe's failure came from the server (a SQLSTATE: it answered) rather than from no answer. */
const isAnswer = (error: unknown): boolean => {
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && !CONNECTION_FAILURE_CODES.has(code);
};
