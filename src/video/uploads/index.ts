import type { FastifyBaseLogger } from "fastify";
import type { FileRemovals } from "../../blobs/removals.ts";
import type { BlobStore } from "../../blobs/store.ts";
import type { Clock } from "../../clock.ts";
import type { Config } from "../../config.ts";
import type { Issuer } from "../../identity/service.ts";
import type { JobQueue } from "../../jobs/queue.ts";
import type { VideoRepository } from "../../media/video-repository.ts";
import { loadSecretKey } from "../../secret-box.ts";
import type { Transact } from "../../store/transactions.ts";
import { API_VERSION } from "../../version.ts";
import type { WebhookEmitter } from "../../webhooks/emitter.ts";
import type { VideoPipeline } from "../pipeline.ts";
import type { UploadRepository } from "./repository.ts";
import { UploadAuthorizations, UploadSigner } from "./signatures.ts";
import { ResumableUploads } from "./tus.ts";
import { UrlImports } from "./url-import.ts";

/** Where the tus endpoint answers; upload URLs are `{TUS_PATH}/{upload_id}`. */
export const TUS_PATH = "/v1/media/tus";

export interface UploadServices {
  resumable: ResumableUploads;
  authorizations: UploadAuthorizations;
  imports: UrlImports;
}

export interface UploadDeps {
  repository: UploadRepository;
  transact: Transact;
  config: Config;
  clock: Clock;
  blobs: BlobStore;
  /** Removes the stored file of an import that is no longer wanted. */
  removals: FileRemovals;
  jobs: JobQueue;
  webhooks: WebhookEmitter;
  videos: VideoRepository;
  /** Whether the key or person that made an upload authorization still acts (`ConsoleService.issuerLive`). */
  issuerLive: (issuer: Issuer) => Promise<boolean>;
  pipeline: VideoPipeline;
  logger: FastifyBaseLogger;
}

/** Resumable uploads, signed browser upload authorizations and URL imports of video sources. */
export function createUploadServices(deps: UploadDeps): UploadServices {
  const { config, repository } = deps;
  return {
    resumable: new ResumableUploads(
      {
        dataDir: config.dataDir,
        maxBytes: config.limits.videoSourceBytes,
        expiryMs: config.uploads.expiryMs,
        openPerVideo: config.uploads.openPerVideo,
        clock: deps.clock,
        transact: deps.transact,
        blobs: deps.blobs,
        repository,
        videos: deps.videos,
        pipeline: deps.pipeline,
        logger: deps.logger,
      },
      TUS_PATH,
    ),
    authorizations: new UploadAuthorizations(
      new UploadSigner(() => loadSecretKey(config.secretKey, config.dataDir), deps.clock),
      deps.videos,
      deps.issuerLive,
    ),
    imports: new UrlImports({
      ...deps,
      userAgent: `Cumulo-Import/${API_VERSION}`,
    }),
  };
}
