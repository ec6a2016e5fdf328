import pg from "pg";
import { PG_CONNECT_TIMEOUT_MS } from "./pg-pool.ts";
import type { PgStallWatchdog } from "./pg-stall-watchdog.ts";

export interface ListenHandlers {
  /** LISTEN is in effect: every notification from now on reaches `onNotification`. */
  onListening(): void;
  /** A notification on the channel, with its payload ("" when none was given). */
  onNotification(payload: string): void;
  /** The connection is lost (`error` says why, if known): notifications are missed until `onListening` again. */
  onLost(error?: unknown): void;
}

/** Waited before connecting again after the listening connection was lost or refused. */
const RETRY_MS = 1000;

/**
 * One connection of its own that LISTENs on a PostgreSQL channel, and connects again whenever it is
 * lost. Its handlers are told when it listens and when it stops, so whoever relies on hearing every
 * notification knows when it cannot.
 */
export class PgListener {
  #client: pg.Client | undefined;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;
  /** The name the session takes once it listens: other nodes count the sessions they notify by it. */
  readonly #applicationName: string;

  constructor(
    private readonly databaseUrl: string,
    private readonly channel: string,
    private readonly handlers: ListenHandlers,
    private readonly connectTimeoutMs = PG_CONNECT_TIMEOUT_MS,
    /** Ends the connection when the server stops answering its queries (`caughtUp`'s, say). */
    private readonly watchdog?: PgStallWatchdog,
  ) {
    this.#applicationName = `cumulo listener ${channel}`;
  }

  /** Resolves after the first attempt to listen; should it fail, it is tried again in the background. */
  async start(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.databaseUrl,
      application_name: `cumulo starting listener ${this.channel}`,
      // A connection cut without a FIN (network loss) is noticed by TCP keep-alive.
      keepAlive: true,
      connectionTimeoutMillis: this.connectTimeoutMs,
    });
    this.#client = client;
    this.watchdog?.watch(client);
    client.on("notification", (message) => this.handlers.onNotification(message.payload ?? ""));
    client.on("error", (error) => this.#lost(client, error));
    client.on("end", () => this.#lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${client.escapeIdentifier(this.channel)}`);
      // Named only now: a node counted by `notifyOthers` is one the notification reaches, so a node
      // still connecting does not keep another waiting for a word it cannot send. Until `onListening`
      // its handlers do not rely on what it hears.
      await client.query("select set_config('application_name', $1, false)", [this.#applicationName]);
    } catch (error) {
      this.#lost(client, error);
      return;
    }
    // `close()` may have ended it meanwhile.
    if (this.#client === client) this.handlers.onListening();
  }

  #lost(client: pg.Client, error?: unknown): void {
    if (this.#client !== client) return;
    this.#client = undefined;
    this.handlers.onLost(error);
    client.end().catch(() => undefined);
    if (!this.#closed) this.#retry = setTimeout(() => void this.start(), RETRY_MS);
  }

  /**
   * Resolves once every notification committed before the call has reached the handlers: PostgreSQL
   * signals the listening sessions before the committing one is answered, and a session sends what
   * it was signalled before it answers the next query on its connection.
   */
  async caughtUp(): Promise<void> {
    await this.#client?.query("select 1").catch(() => undefined);
  }

  /**
   * Sends `payload` on the channel from this connection (whose own listening hears it too), and
   * resolves to how many other sessions on this database listen on it under the same name: the other
   * processes' listeners, those the notification was sent to. PostgreSQL shows every session's
   * `application_name` (`pg_stat_get_activity`, as in `pg_stat_activity`), whoever owns it.
   */
  async notifyOthers(payload: string): Promise<number> {
    if (!this.#client) throw new Error(`not connected to listen on ${this.channel}`);
    const { rows } = await this.#client.query<{ others: number }>(
      // The function behind pg_stat_activity, without the view's joins: less than half its time.
      `select pg_notify($1, $2), (
         select count(*)::int from pg_stat_get_activity(null) activity
         where activity.datid = (select oid from pg_database where datname = current_database())
           and activity.application_name = $3 and activity.pid <> pg_backend_pid()
       ) as others`,
      [this.channel, payload, this.#applicationName],
    );
    return rows[0]?.others ?? 0;
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = undefined;
    await client?.end();
  }
}
