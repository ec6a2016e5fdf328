import type { FastifyBaseLogger } from "fastify";
import type { Redis } from "ioredis";
import { LocalBlobStore } from "./blobs/local.ts";
import { FileRemovals } from "./blobs/removals.ts";
import { S3BlobStore } from "./blobs/s3.ts";
import type { BlobStore } from "./blobs/store.ts";
import type { Bus } from "./bus.ts";
import { AnalyticsService, TrafficRecorder } from "./cdn/analytics.ts";
import { HostnameClaimTokens } from "./cdn/hostname-verification.ts";
import { PurgeSync } from "./cdn/purge-sync.ts";
import { DistributionRepository, TrafficRepository } from "./cdn/repository.ts";
import { CdnService } from "./cdn/service.ts";
import type { Clock } from "./clock.ts";
import { SimulatedDriver } from "./cloud/driver/simulated.ts";
import { type CloudServices, createCloudServices } from "./cloud/index.ts";
import type { Config } from "./config.ts";
import type { ConsoleService } from "./identity/console-service.ts";
import { createIdentityServices } from "./identity/index.ts";
import type { IdentityService } from "./identity/service.ts";
import { SESSION_IDLE_MS } from "./identity/sessions.ts";
import type { JobHandler } from "./jobs/queue.ts";
import { JobQueue } from "./jobs/queue.ts";
import { JobRepository } from "./jobs/repository.ts";
import { FolderRepository } from "./media/folder-repository.ts";
import { createMediaServices, type MediaServices } from "./media/index.ts";
import { PlayerRepository } from "./media/player-repository.ts";
import { LibraryRepository } from "./media/repository.ts";
import { VideoRepository } from "./media/video-repository.ts";
import { Housekeeper, type PruneTask } from "./ops/housekeeping.ts";
import type { Metrics } from "./ops/metrics.ts";
import { loadSecretKey, SecretBox } from "./secret-box.ts";
import type { Store } from "./store/database.ts";
import { transactor } from "./store/transactions.ts";
import { API_VERSION } from "./version.ts";
import { createVideoServices, type VideoServices } from "./video/index.ts";
import { VideoProcessingRepository } from "./video/repository.ts";
import { createUploadServices, type UploadServices } from "./video/uploads/index.ts";
import { UploadRepository } from "./video/uploads/repository.ts";
import { StrandedUploadFinisher } from "./video/uploads/stranded-uploads.ts";
import { openFilesLimit, slowAttemptSlots, slowSlotsCut } from "./webhooks/connection-budget.ts";
import { DeliveryRepository } from "./webhooks/delivery-repository.ts";
import { relayWakeups, WebhookDispatcher } from "./webhooks/dispatcher.ts";
import { WebhookEmitter } from "./webhooks/emitter.ts";
import { WebhookRepository } from "./webhooks/repository.ts";
import { SealedHeaders } from "./webhooks/sealed-headers.ts";
import { SigningSecrets } from "./webhooks/secrets.ts";
import { WebhookSender } from "./webhooks/sender.ts";
import { WebhookService } from "./webhooks/service.ts";

/** Webhook attempts a process claims for endpoints not known slow (being sent or waiting their turn). */
export const WEBHOOK_CONCURRENCY = 256;

/** What every part of Cumulo is built from; outside systems are injected here. */
export interface CoreDeps {
  config: Config;
  store: Store;
  clock: Clock;
  bus: Bus;
  redis: Redis | undefined;
  logger: FastifyBaseLogger;
  /** This process's Prometheus metrics (src/ops/metrics.ts). */
  metrics: Metrics;
}

/** Something a role runs in the background besides queued jobs (a dispatcher with its own claiming loop). */
export interface BackgroundWorker {
  name: string;
  /** Resolves once the worker hears everything it reacts to (wake-ups from other nodes included). */
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface Services {
  identity: IdentityService;
  /** Console users, passwords, sessions and invitations. */
  console: ConsoleService;
  jobs: JobQueue;
  jobRepository: JobRepository;
  cdn: CdnService;
  cdnAnalytics: AnalyticsService;
  /** Edge traffic counters; `flush()` writes them to the store at once. */
  cdnTraffic: TrafficRecorder;
  libraries: LibraryRepository;
  webhookRepository: WebhookRepository;
  webhooks: WebhookEmitter;
  blobs: BlobStore;
  /** Removes the files of deleted items durably (a job queued with the change). */
  removals: FileRemovals;
  media: MediaServices;
  webhookEndpoints: WebhookService;
  webhookDispatcher: WebhookDispatcher;
  /** The webhook attempt queue (its backlog is a metric). */
  webhookDeliveries: DeliveryRepository;
  cloud: CloudServices;
  /** Video processing, playback tokens and the edge's media origin. */
  video: VideoServices;
  /** Resumable (tus) uploads, signed upload authorizations and URL imports of video sources. */
  uploads: UploadServices;
  /** Handlers of queued jobs, run by the worker role. */
  jobHandlers: JobHandler[];
  workers: BackgroundWorker[];
  /** Run by the api role: work on what lives on an API node's own disk (partial tus uploads). */
  apiWorkers: BackgroundWorker[];
}

/** The composition root: builds each domain's repository and service, in dependency order. */
export function createServices(deps: CoreDeps): Services {
  const { store, clock, config } = deps;
  const transact = transactor(store.db);
  // One box for every stored secret (object-storage keys, webhook signing secrets): one key, read once.
  const secrets = new SecretBox(() => loadSecretKey(config.secretKey, config.dataDir));
  const signingSecrets = new SigningSecrets(secrets);
  const sealedHeaders = new SealedHeaders(secrets);
  const { identity, console: consoleService } = createIdentityServices(deps);
  const jobRepository = new JobRepository(store.db, store.dialect);
  const jobs = new JobQueue(jobRepository, clock);
  const cdnPurgeSync = new PurgeSync(deps.bus);
  const cdn = new CdnService(
    new DistributionRepository(store.db),
    config,
    clock,
    deps.bus,
    cdnPurgeSync,
    new HostnameClaimTokens(() => loadSecretKey(config.secretKey, config.dataDir)),
    deps.logger,
  );
  const cdnTrafficRepository = new TrafficRepository(store.db, store.dialect);
  const cdnAnalytics = new AnalyticsService(
    cdnTrafficRepository,
    cdn,
    clock,
    config.keptAnswers ? store.generationWithTraffic : undefined,
  );
  const cdnTraffic = new TrafficRecorder(
    cdnTrafficRepository,
    clock,
    deps.logger,
    config.edge.analyticsFlushMs,
    deps.bus,
  );
  const webhookRepository = new WebhookRepository(store.db, store.dialect);
  const webhooks = new WebhookEmitter(webhookRepository, clock);
  const libraries = new LibraryRepository(store.db, store.dialect);
  const blobs: BlobStore =
    config.blobStore.kind === "s3"
      ? new S3BlobStore(config.blobStore)
      : new LocalBlobStore(config.dataDir, {
          longestUploadMs: Math.max(config.listener.requestTimeoutMs, config.uploads.importTimeoutMs),
        });
  const removals = new FileRemovals({ transact, blobs, jobs, jobRepository, clock, logger: deps.logger });
  const videoRepository = new VideoRepository(store.db, store.dialect);
  const playerRepository = new PlayerRepository(store.db);
  const media = createMediaServices({
    transact,
    config,
    clock,
    libraries,
    folders: new FolderRepository(store.db),
    videos: videoRepository,
    players: playerRepository,
    blobs,
    removals,
    cdn,
    jobs,
    webhooks,
    webhookRepository,
  });
  const webhookDeliveries = new DeliveryRepository(store.db, store.dialect);
  const webhookEndpoints = new WebhookService(
    transact,
    webhookRepository,
    webhookDeliveries,
    webhooks,
    libraries,
    clock,
    signingSecrets,
    sealedHeaders,
    {
      allowPrivate: config.webhookAllowPrivate,
      maxEndpointsPerLibrary: config.limits.webhookEndpointsPerLibrary,
    },
  );
  relayWakeups(webhooks, deps.bus, deps.logger);
  const openFiles = openFilesLimit();
  const webhookDispatcher = new WebhookDispatcher(
    webhookDeliveries,
    webhooks,
    deps.bus,
    new WebhookSender({
      allowPrivate: config.webhookAllowPrivate,
      timeoutMs: config.limits.webhookTimeoutMs,
      maxResponseBytes: config.limits.webhookResponseBytes,
      userAgent: `Cumulo-Webhooks/${API_VERSION}`,
    }),
    signingSecrets,
    sealedHeaders,
    clock,
    deps.logger,
    // The lease outlasts an attempt (bounded by the timeout) with room to record it.
    {
      // Sockets waiting on slow receivers cost little; many endpoints are served at once.
      concurrency: WEBHOOK_CONCURRENCY,
      slowConcurrency: slowAttemptSlots(WEBHOOK_CONCURRENCY, openFiles),
      slowSlotsCut: slowSlotsCut(WEBHOOK_CONCURRENCY, openFiles),
      perEndpoint: 8,
      pollMs: config.limits.webhookPollMs,
      leaseMs: 2 * config.limits.webhookTimeoutMs + 1000,
      onAttempt: deps.metrics.webhookAttempt,
    },
  );
  const cloud = createCloudServices({
    db: store.db,
    dialect: store.dialect,
    identity,
    driver: new SimulatedDriver(),
    secrets,
    config,
    clock,
  });
  const video = createVideoServices({
    transact,
    config,
    clock,
    blobs,
    removals,
    jobs,
    webhooks,
    libraries,
    videos: videoRepository,
    players: playerRepository,
    processing: new VideoProcessingRepository(store.db),
    logger: deps.logger,
    onMediaToolRun: deps.metrics.mediaToolRun,
  });
  const uploads = createUploadServices({
    repository: new UploadRepository(store.db),
    transact,
    config,
    clock,
    blobs,
    removals,
    jobs,
    webhooks,
    videos: videoRepository,
    issuerLive: (issuer) => consoleService.issuerLive(issuer),
    pipeline: video.pipeline,
    logger: deps.logger,
  });

  return {
    identity,
    console: consoleService,
    jobs,
    jobRepository,
    cdn,
    cdnAnalytics,
    cdnTraffic,
    libraries,
    webhookRepository,
    webhooks,
    blobs,
    removals,
    media,
    webhookEndpoints,
    webhookDispatcher,
    webhookDeliveries,
    cloud,
    video,
    uploads,
    jobHandlers: [
      media.libraries.provisioningHandler(),
      video.pipeline.handler(),
      uploads.imports.handler(),
      removals.handler(),
    ],
    workers: [
      webhookDispatcher,
      new Housekeeper(
        [
          ...pruneTasks(config, jobRepository, cdnTrafficRepository),
          {
            // Idle this long, a session has ended whatever its expiry: its row is only clutter.
            name: "ended console sessions",
            keepMs: SESSION_IDLE_MS,
            prune: (before) => consoleService.pruneEndedSessions(before),
          },
        ],
        clock,
        deps.logger,
      ),
    ],
    apiWorkers: [
      new StrandedUploadFinisher(uploads.resumable, deps.logger, config.storageRecheckMs),
      // On the nodes that hold the partial files: a worker-only node would remove the records and
      // leave every API node's files behind.
      new Housekeeper(
        [
          {
            name: "abandoned resumable uploads",
            keepMs: config.uploads.expiryMs,
            prune: (before) => uploads.resumable.pruneCreatedBefore(before),
          },
        ],
        clock,
        deps.logger,
      ),
    ],
  };
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** What the housekeeper deletes, by the configured retention (0 days: kept forever). */
function pruneTasks(config: Config, jobs: JobRepository, traffic: TrafficRepository): PruneTask[] {
  const tasks: PruneTask[] = [];
  const { doneJobsDays, cdnMinuteDays } = config.retention;
  if (doneJobsDays > 0) {
    tasks.push({
      name: "finished jobs",
      keepMs: doneJobsDays * DAY_MS,
      prune: (before) => jobs.pruneDone(before.toISOString()),
    });
  }
  if (cdnMinuteDays > 0) {
    tasks.push({
      name: "CDN minute and five-minute rollups",
      keepMs: cdnMinuteDays * DAY_MS,
      prune: (before) => traffic.pruneMinutesBefore(Math.floor(before.getTime() / 60_000)),
    });
  }
  return tasks;
}
