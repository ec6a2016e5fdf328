import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from "kysely";
import type pg from "pg";
import { wrappingClients } from "./pg-pool.ts";

/**
 * Named statements per connection: about what PostgreSQL's JDBC driver keeps by default. Later texts
 * run unnamed, so a connection's server-side memory stays bounded whatever the queries.
 */
export const MAX_NAMED_STATEMENTS = 256;

/**
 * "cached plan must not change result type" (and other unsupported cases): a named statement prepared
 * before a schema change (another node's migration adding a column) cannot run again on its
 * connection. Such a statement is given up and its text prepared again under a new name.
 */
const FEATURE_NOT_SUPPORTED = "0A000";

/**
 * A pool client that runs each parameterized query as a named prepared statement: PostgreSQL then
 * parses and plans a text once per connection instead of on every run, which halved its CPU per
 * page query (docs/performance.md, session 5). Works directly and through PgBouncer 1.21+ with
 * `max_prepared_statements` set; `CUMULO_PG_PREPARED_STATEMENTS=false` turns it off for older
 * poolers. Queries without parameters run as before (the simple protocol, which also allows several
 * statements in one text, as migrations do).
 */
class PreparingClient implements PostgresPoolClient {
  readonly #names = new Map<string, string>();
  #namesGiven = 0;

  constructor(private readonly client: pg.PoolClient) {}

  query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(
    sqlOrCursor: string | PostgresCursor<R>,
    parameters?: ReadonlyArray<unknown>,
  ): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    if (typeof sqlOrCursor !== "string") return this.client.query(sqlOrCursor as never);
    return this.#run(sqlOrCursor, parameters ?? []);
  }

  release(): void {
    this.client.release();
  }

  async #run<R>(text: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>> {
    const values = [...parameters];
    const name = parameters.length > 0 ? this.#nameFor(text) : undefined;
    if (!name) return (await this.client.query({ text, values })) as never;
    // Read before the query: after a failure this still tells whether it ran in its own transaction.
    const ownTransaction = this.client.getTransactionStatus() === "I";
    try {
      return (await this.client.query({ name, text, values })) as never;
    } catch (error) {
      if ((error as { code?: string }).code !== FEATURE_NOT_SUPPORTED) throw error;
      this.#names.delete(text);
      // Inside a transaction the error has aborted it: the caller's transaction fails, and the next
      // run prepares again. On its own the statement changed nothing and can run again at once.
      if (!ownTransaction) throw error;
      return (await this.client.query({ text, values })) as never;
    }
  }

  #nameFor(text: string): string | undefined {
    let name = this.#names.get(text);
    if (name === undefined && this.#namesGiven < MAX_NAMED_STATEMENTS) {
      this.#namesGiven += 1;
      name = `cumulo_${this.#namesGiven}`;
      this.#names.set(text, name);
    }
    return name;
  }
}

/** `pool` for Kysely's PostgresDialect, handing out clients that prepare their queries by name. */
export const preparingPool = (pool: pg.Pool): PostgresPool =>
  // One wrapper per connection: it knows that connection's statements.
  wrappingClients<pg.PoolClient>(pool, (client) => new PreparingClient(client));
