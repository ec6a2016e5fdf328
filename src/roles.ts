import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import type { Redis } from "ioredis";
import pino from "pino";
import { buildApp } from "./app.ts";
import { type Bus, connectRedis, LocalBus, RedisBus } from "./bus.ts";
import { EdgeServer } from "./cdn/edge/server.ts";
import { type Clock, systemClock } from "./clock.ts";
import type { Config } from "./config.ts";
import { JobRunner } from "./jobs/queue.ts";
import { type CoreDeps, createServices, type Services } from "./services.ts";
import { openStore, type Store } from "./store/database.ts";

export interface RunningCumulo {
  config: Config;
  store: Store;
  services: Services;
  /** The API listener's base URL, when this process runs the api role. */
  apiUrl: string | undefined;
  app: FastifyInstance | undefined;
  /** The CDN edge listener's base URL, when this process runs the edge role. */
  edgeUrl: string | undefined;
  /** A key generated on first start (empty store, no bootstrap key); shown once. */
  generatedKey: string | undefined;
  close(): Promise<void>;
}

export interface StartOptions {
  logger?: FastifyBaseLogger;
  clock?: Clock;
}

export const createLogger = (config: Config): FastifyBaseLogger =>
  pino({ level: config.logLevel, base: undefined }) as FastifyBaseLogger;

/** Opens the store (migrating it) and the shared outside systems that every command needs. */
export async function openCore(config: Config, options: StartOptions = {}): Promise<CoreDeps> {
  const logger = options.logger ?? createLogger(config);
  const store = openStore({ dataDir: config.dataDir, databaseUrl: config.databaseUrl });
  try {
    await store.migrate();
  } catch (error) {
    await store.close();
    throw error;
  }
  const onRedisError = (error: Error) => logger.warn({ err: error }, "redis error");
  let redis: Redis | undefined;
  let bus: Bus = new LocalBus();
  if (config.redisUrl) {
    try {
      redis = await connectRedis(config.redisUrl, onRedisError, { maxRetriesPerRequest: 3 });
      bus = await RedisBus.connect(config.redisUrl, config.redisPrefix, onRedisError);
    } catch (error) {
      redis?.disconnect();
      await store.close();
      throw error;
    }
  }
  return { config, store, clock: options.clock ?? systemClock, bus, redis, logger };
}

export async function closeCore(deps: CoreDeps): Promise<void> {
  await deps.bus.close();
  deps.redis?.disconnect();
  await deps.store.close();
}

/**
 * Starts the roles named in the config in this process. `close()` shuts down in order: stop taking
 * requests and let in-flight ones finish, stop the workers (each finishes what it holds), close the store.
 */
export async function startCumulo(config: Config, options: StartOptions = {}): Promise<RunningCumulo> {
  const deps = await openCore(config, options);
  const services = createServices(deps);
  const { generatedKey } = await services.identity.ensureBootstrap(config.bootstrapApiKey);

  let app: FastifyInstance | undefined;
  let apiUrl: string | undefined;
  if (config.roles.includes("api")) {
    app = await buildApp(deps, services);
    await app.listen({ port: config.port, host: config.host });
    const address = app.server.address();
    const port = typeof address === "object" && address ? address.port : config.port;
    apiUrl = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
  }

  let edge: EdgeServer | undefined;
  let edgeUrl: string | undefined;
  if (config.roles.includes("edge") && config.edgePort !== "off") {
    edge = new EdgeServer({
      ...deps,
      cdn: services.cdn,
      traffic: services.cdnTraffic,
      mediaOrigin: services.video.origin,
    });
    edgeUrl = await edge.start(config.host, config.edgePort);
  }

  const runner = config.roles.includes("worker")
    ? new JobRunner(services.jobs, services.jobRepository, services.jobHandlers, deps.clock, deps.logger)
    : undefined;
  const workers = config.roles.includes("worker") ? services.workers : [];
  runner?.start();
  for (const worker of workers) await worker.start();

  let closing: Promise<void> | undefined;
  return {
    config,
    store: deps.store,
    services,
    apiUrl,
    app,
    edgeUrl,
    generatedKey,
    close() {
      closing ??= (async () => {
        await app?.close();
        await edge?.close();
        await Promise.all([runner?.stop(), ...workers.map((worker) => worker.stop())]);
        await closeCore(deps);
      })();
      return closing;
    },
  };
}
