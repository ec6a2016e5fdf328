import type { FastifyBaseLogger } from "fastify";
import type { Redis } from "ioredis";
import pino from "pino";
import { type Bus, connectRedis, LocalBus, RedisBus } from "./bus.ts";
import { type Clock, OffsetClock, systemClock } from "./clock.ts";
import { type Config, runningRoles } from "./config.ts";
import { Metrics, metricsExposed } from "./ops/metrics.ts";
import type { CoreDeps } from "./services.ts";
import { openStore, type Store } from "./store/database.ts";

/*
 * What every process opens, whatever it runs: the store and the shared outside systems. Apart from
 * the roles (src/roles.ts) so that a CLI command loads neither the HTTP app nor the listeners.
 */

export interface StartOptions {
  logger?: FastifyBaseLogger;
  clock?: Clock;
  /**
   * Told the admin key a first start generated as soon as it is stored: it is shown even when the
   * start fails later (a port in use), after which the store is no longer empty and none is made.
   */
  onGeneratedKey?: (key: string) => void;
  /** Told, in place of a log line, that migrating waits for another process (the CLI's log is silent). */
  onMigrationWait?: (message: string) => void;
  /** Told the names of the migrations this start applied (none when the store was up to date). */
  onMigrated?: (names: string[]) => void;
}

const MIGRATION_WAIT_MESSAGE =
  "another process holds the SQLite store's write lock (migrating it, most likely): waiting for it to finish";

/**
 * pino's default bindings, `pid` and `hostname`, on every line: nodes whose logs meet in one stream
 * (a file, syslog, a shipper that labels nothing) are told apart by their lines alone.
 */
export const createLogger = (config: Config): FastifyBaseLogger =>
  pino({ level: config.logLevel }) as FastifyBaseLogger;

/** Opens the store (migrating it) and the shared outside systems that every command needs. */
export async function openCore(config: Config, options: StartOptions = {}): Promise<CoreDeps> {
  const logger = options.logger ?? createLogger(config);
  const exposed = metricsExposed(config);
  const metrics = new Metrics({ processMetrics: exposed, roles: runningRoles(config) });
  const storeFailure = (error: unknown) =>
    new Error(
      `cannot open the store (${config.databaseUrl ? "DATABASE_URL" : "CUMULO_DATA_DIR"}): ${error instanceof Error ? error.message : String(error)}`,
    );
  let store: Store;
  try {
    store = openStore({
      dataDir: config.dataDir,
      databaseUrl: config.databaseUrl,
      pgPreparedStatements: config.pgPreparedStatements,
      pgConnectTimeoutMs: config.pgConnectTimeoutMs,
      // Nobody reads query timings when /metrics is off: the store then times nothing.
      onQuery: exposed ? metrics.storeQuery : undefined,
      onFileReplaced: (path) =>
        logger.error(
          { path },
          "the SQLite store file was removed or replaced while this process had it open (a restore into a running server's data dir?); writes are refused from now on, since they would be lost: restart the node",
        ),
    });
  } catch (error) {
    throw storeFailure(error);
  }
  const onMigrationWait = options.onMigrationWait ?? ((message: string) => logger.warn(message));
  try {
    const applied = await store.migrate(() => onMigrationWait(MIGRATION_WAIT_MESSAGE));
    options.onMigrated?.(applied);
  } catch (error) {
    await store.close().catch(() => undefined);
    throw storeFailure(error);
  }
  const onRedisError = (error: Error) => logger.warn({ err: error }, "redis error");
  let redis: Redis | undefined;
  let bus: Bus = new LocalBus();
  if (config.redisUrl) {
    try {
      const { redisStartTimeoutMs } = config;
      redis = await connectRedis(
        config.redisUrl,
        onRedisError,
        { maxRetriesPerRequest: 3 },
        redisStartTimeoutMs,
      );
      bus = await RedisBus.connect(config.redisUrl, config.redisPrefix, onRedisError, redisStartTimeoutMs);
    } catch (error) {
      redis?.disconnect();
      await store.close();
      throw error;
    }
  }
  return {
    config,
    store,
    clock: options.clock ?? (config.devMode ? new OffsetClock() : systemClock),
    bus,
    redis,
    logger,
    metrics,
  };
}

export async function closeCore(deps: CoreDeps): Promise<void> {
  await deps.bus.close();
  deps.redis?.disconnect();
  await deps.store.close();
}
