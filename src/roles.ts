import { accessSync, constants } from "node:fs";
import type { FastifyInstance } from "fastify";
import { buildApp } from "./app.ts";
import { checkStorageAtStart } from "./blobs/start-up.ts";
import { EdgeServer } from "./cdn/edge/server.ts";
import type { Config } from "./config.ts";
import { closeCore, openCore, type StartOptions } from "./core.ts";
import { makeDirectories } from "./directories.ts";
import { stopListening } from "./http/listener.ts";
import { JobRunner } from "./jobs/queue.ts";
import { MetricsListener } from "./ops/metrics-endpoint.ts";
import { createServices, type Services } from "./services.ts";
import type { Store } from "./store/database.ts";
import { stopOrphanedTools } from "./video/orphans.ts";
import { videoWorkRoot } from "./video/pipeline.ts";

export interface RunningCumulo {
  config: Config;
  store: Store;
  services: Services;
  /** The API listener's base URL, when this process runs the api role. */
  apiUrl: string | undefined;
  app: FastifyInstance | undefined;
  /** The CDN edge listener's base URL, when this process runs the edge role. */
  edgeUrl: string | undefined;
  /** The metrics listener's base URL, when `CUMULO_METRICS_PORT` is set. */
  metricsUrl: string | undefined;
  /** A key generated on first start (empty store, no bootstrap key); shown once. */
  generatedKey: string | undefined;
  close(): Promise<void>;
}

/** Logged at start when the store's secrets do not open with this node's key. */
const UNOPENED_SECRETS =
  "stored secrets do not open with this node's secret key (CUMULO_SECRET_KEY, else <data dir>/cloud-secret.key): it is not the key they were sealed with. Until that key is given back, webhook attempts are recorded as failed without being sent, and reading or changing webhook endpoints and S3 users answers 503; every node must share one key, and values an earlier version kept in plain text stay so (docs/operations.md, Backups)";

/** Binds a listener; a failure (address in use, unknown host) names the variables to change. */
async function listening<T>(
  variable: string,
  host: string,
  port: number,
  bind: () => Promise<T>,
): Promise<T> {
  try {
    return await bind();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(`cannot listen on ${host}:${port} (HOST, ${variable}): ${reason}`);
  }
}

/**
 * Every role writes under the data dir, whatever the store: unfinished uploads (api), the scratch
 * space of video processing (worker), the edge's disk cache and the generated secret key. A node
 * on PostgreSQL and S3 that could not write there started, said it was ready, and failed each
 * upload with a 503 and postponed each video for a day.
 */
function usableDataDir(dataDir: string): void {
  try {
    makeDirectories(dataDir);
    accessSync(dataDir, constants.W_OK | constants.X_OK);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(`cannot write to the data dir ${dataDir} (CUMULO_DATA_DIR): ${reason}`);
  }
}

/**
 * Starts the roles named in the config in this process. `close()` shuts down in order: stop taking
 * requests and let in-flight ones finish, stop the workers (each finishes what it holds), close the store.
 */
export async function startCumulo(given: Config, options: StartOptions = {}): Promise<RunningCumulo> {
  // This process's own copy: values resolved at start (a chosen edge port) stay in it.
  const config: Config = { ...given };
  usableDataDir(config.dataDir);
  const deps = await openCore(config, options);
  let services: Services;
  let generatedKey: string | undefined;
  // The edge binds first: with CUMULO_EDGE_PORT=0 the playback URLs the API returns must name the
  // port it was given, so the chosen URL becomes the edge public URL of this process.
  let edge: EdgeServer | undefined;
  let edgeUrl: string | undefined;
  let app: FastifyInstance | undefined;
  let apiUrl: string | undefined;
  let metricsListener: MetricsListener | undefined;
  let metricsUrl: string | undefined;
  let stopCheckingStorage: (() => void) | undefined;
  try {
    // Inside the try, as all that follows: a file the services read (a GeoIP database) or the
    // bootstrap's write may fail too, and the store and Redis must then be closed.
    services = createServices(deps);
    const bootstrap = await services.identity.ensureBootstrap(config.bootstrapApiKey);
    generatedKey = bootstrap.generatedKey;
    if (generatedKey) options.onGeneratedKey?.(generatedKey);
    if (bootstrap.restoredKey) {
      deps.logger.warn(
        "CUMULO_BOOTSTRAP_API_KEY names a key that was revoked: it is valid again, as the setting asks; to keep it revoked, set another key or none",
      );
    }
    const renamed = await services.libraries.refreshSearchNames();
    if (renamed > 0)
      deps.logger.info({ libraries: renamed }, "libraries given the search names of their names");
    const shadowed = await services.console.emailsShadowed();
    if (shadowed.length > 0)
      deps.logger.warn(
        { users: shadowed.map((user) => user.id) },
        "console users whose email another user has in another Unicode form cannot sign in; remove one of each pair (cumulo users remove) (docs/operations.md, Upgrades and migrations)",
      );
    // A node given another key than the store's secrets were sealed with (a second node without the
    // shared key, a restored data dir without its key file) says so at once, not at the first 500.
    const [webhookSecretsOpen, s3SecretsOpen] = await Promise.all([
      services.webhookEndpoints.storedSecretsOpen(),
      services.cloud.objectStorage.storedSecretsOpen(),
    ]);
    if (!webhookSecretsOpen || !s3SecretsOpen) deps.logger.error(UNOPENED_SECRETS);
    // Sealed only under the key the endpoints' secrets open with: sealed under a wrong one, an
    // earlier build's plain values would be lost once the right key is back (QA of session 47).
    if (webhookSecretsOpen) {
      const sealed = await services.webhookEndpoints.sealPlainSecrets();
      if (sealed > 0)
        deps.logger.info(
          { values: sealed },
          "webhook signing secrets and custom headers sealed with the secret key",
        );
    }
    deps.metrics.observe({
      clock: deps.clock,
      jobKinds: services.jobHandlers.map((handler) => handler.kind),
      jobs: services.jobRepository,
      webhookBacklog: () => services.webhookDeliveries.backlog(),
      pool: deps.store.pool,
      redis: deps.redis,
      geoipBuiltAt: () => services.video.countries.databaseBuiltAt,
    });
    stopCheckingStorage = await checkStorageAtStart(services.blobs, deps.logger, config.storageRecheckMs);
    const metricsPort = config.metrics.port;
    if (metricsPort !== undefined) {
      const listener = new MetricsListener(deps, deps.metrics, deps.store);
      metricsListener = listener;
      metricsUrl = await listener.start(config.metrics.host, metricsPort);
    }

    if (config.roles.includes("edge") && config.edgePort !== "off") {
      const edgePort = config.edgePort;
      const server = new EdgeServer({
        ...deps,
        cdn: services.cdn,
        traffic: services.cdnTraffic,
        mediaOrigin: services.video.origin,
      });
      edge = server;
      edgeUrl = await listening("CUMULO_EDGE_PORT", config.host, edgePort, () =>
        server.start(config.host, edgePort),
      );
      if (edgePort === 0 && config.edgePublicUrl === undefined) config.edgePublicUrl = edgeUrl;
    }

    if (config.roles.includes("api")) {
      const api = await buildApp(deps, services);
      app = api;
      await listening("PORT", config.host, config.port, () =>
        api.listen({ port: config.port, host: config.host }),
      );
      const address = api.server.address();
      const port = typeof address === "object" && address ? address.port : config.port;
      apiUrl = `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`;
    }
  } catch (error) {
    stopCheckingStorage?.();
    await app?.close().catch(() => undefined);
    await edge?.close().catch(() => undefined);
    await metricsListener?.close().catch(() => undefined);
    await closeCore(deps).catch(() => undefined);
    throw error;
  }

  const runner = config.roles.includes("worker")
    ? new JobRunner(services.jobs, services.jobRepository, services.jobHandlers, deps.clock, deps.logger, {
        onRun: deps.metrics.jobRun,
      })
    : undefined;
  const workers = [
    ...(config.roles.includes("worker") ? services.workers : []),
    ...(config.roles.includes("api") ? services.apiWorkers : []),
  ];
  // Before this worker's own runs start: what a worker killed on this data dir left running.
  if (runner) await stopOrphanedTools(videoWorkRoot(config.dataDir), deps.logger);
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
    metricsUrl,
    generatedKey,
    close() {
      closing ??= (async () => {
        metricsListener?.stopping();
        stopCheckingStorage?.();
        // Fastify's close starts answering with `Connection: close` before any hook of ours runs;
        // a client reconnecting while the listening socket is still open would then be reset.
        if (app) stopListening(app.server);
        await Promise.all([app?.close(), edge?.close()]);
        await Promise.all([runner?.stop(), ...workers.map((worker) => worker.stop())]);
        await metricsListener?.close();
        await closeCore(deps);
      })();
      return closing;
    },
  };
}
