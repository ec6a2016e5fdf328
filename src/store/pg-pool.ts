import type { PostgresPool, PostgresPoolClient } from "kysely";

/**
 * How long a new PostgreSQL connection may take to be ready: a server that accepts the connection
 * and then says nothing (a wrong port, a hung server) fails start-up with one line instead of hanging.
 */
export const PG_CONNECT_TIMEOUT_MS = 10_000;

/**
 * `pool` for Kysely's PostgresDialect, handing out `wrap`'s client for each of its connections: one
 * wrapper per connection, made when it is first handed out and kept as long as the connection, so a
 * wrapper may hold what it knows about that connection.
 */
export function wrappingClients<Client extends object>(
  pool: { connect(): Promise<Client>; end(): Promise<void> },
  wrap: (client: Client) => PostgresPoolClient,
): PostgresPool {
  const wrappers = new WeakMap<Client, PostgresPoolClient>();
  return {
    async connect() {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (!wrapper) {
        wrapper = wrap(client);
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
    end: () => pool.end(),
  };
}
