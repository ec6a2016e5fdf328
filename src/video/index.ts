import type { FastifyBaseLogger } from "fastify";
import type { BlobStore } from "../blobs/store.ts";
import type { Clock } from "../clock.ts";
import { loadSecretKey } from "../cloud/secrets.ts";
import type { Config } from "../config.ts";
import type { JobQueue } from "../jobs/queue.ts";
import type { PlayerRepository } from "../media/player-repository.ts";
import type { LibraryRepository } from "../media/repository.ts";
import type { VideoRepository } from "../media/video-repository.ts";
import type { Transact } from "../store/transactions.ts";
import type { WebhookEmitter } from "../webhooks/emitter.ts";
import { PlaybackAccess } from "./access.ts";
import { VideoMediaOrigin } from "./media-origin.ts";
import { locateMediaTools, MediaTools } from "./media-tools.ts";
import { VideoPipeline } from "./pipeline.ts";
import type { VideoProcessingRepository } from "./repository.ts";
import { PlaybackTokens } from "./tokens.ts";
import { Transcoder } from "./transcoder.ts";

export interface VideoServices {
  pipeline: VideoPipeline;
  tokens: PlaybackTokens;
  origin: VideoMediaOrigin;
  /** The playback rules, shared by the media origin and the embed page. */
  access: PlaybackAccess;
}

export interface VideoDeps {
  transact: Transact;
  config: Config;
  clock: Clock;
  blobs: BlobStore;
  jobs: JobQueue;
  webhooks: WebhookEmitter;
  libraries: LibraryRepository;
  videos: VideoRepository;
  players: PlayerRepository;
  processing: VideoProcessingRepository;
  logger: FastifyBaseLogger;
}

/** The video domain: processing pipeline, playback tokens and the edge's media origin. */
export function createVideoServices(deps: VideoDeps): VideoServices {
  // ffmpeg is looked up on first use, so processes that never process video need none.
  let tools: MediaTools | undefined;
  const lazyTools = () => {
    tools ??= new MediaTools(locateMediaTools(), {
      concurrency: deps.config.video.ffmpegConcurrency,
      timeoutMs: deps.config.video.ffmpegTimeoutMs,
    });
    return tools;
  };
  const transcoder = new Transcoder(
    new Proxy({} as MediaTools, {
      get: (_target, name) => {
        const real = lazyTools();
        const value = Reflect.get(real, name, real);
        return typeof value === "function" ? value.bind(real) : value;
      },
    }),
  );
  const tokens = new PlaybackTokens(
    () => loadSecretKey(deps.config.secretKey, deps.config.dataDir),
    deps.clock,
  );
  const access = new PlaybackAccess(deps.libraries, deps.videos, deps.players, deps.processing, tokens);
  return {
    pipeline: new VideoPipeline({ ...deps, transcoder }),
    tokens,
    origin: new VideoMediaOrigin(access, deps.blobs, deps.logger),
    access,
  };
}
