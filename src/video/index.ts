import type { PlayerRepository } from "../media/player-repository.ts";
import type { LibraryRepository } from "../media/repository.ts";
import { loadSecretKey } from "../secret-box.ts";
import { PlaybackAccess } from "./access.ts";
import { VideoMediaOrigin } from "./media-origin.ts";
import { locateMediaTools, type MediaToolOptions, MediaTools } from "./media-tools.ts";
import { type PipelineDeps, VideoPipeline, videoWorkRoot } from "./pipeline.ts";
import { PlaybackTokens } from "./tokens.ts";
import { Transcoder } from "./transcoder.ts";
import { ViewerCountries } from "./viewer-countries.ts";

export interface VideoServices {
  pipeline: VideoPipeline;
  tokens: PlaybackTokens;
  origin: VideoMediaOrigin;
  /** The playback rules, shared by the media origin and the embed page. */
  access: PlaybackAccess;
  /** Where the country rules get the viewer's country, for the media origin and the embed page. */
  countries: ViewerCountries;
}

/** The pipeline's needs, and what playback reads of media (its libraries and players). */
export interface VideoDeps extends Omit<PipelineDeps, "transcoder"> {
  libraries: LibraryRepository;
  players: PlayerRepository;
  onMediaToolRun?: MediaToolOptions["onRun"];
}

/** The video domain: processing pipeline, playback tokens and the edge's media origin. */
export function createVideoServices(deps: VideoDeps): VideoServices {
  // ffmpeg is looked up on first use, so processes that never process video need none.
  let tools: MediaTools | undefined;
  const lazyTools = () => {
    tools ??= new MediaTools(locateMediaTools(), {
      concurrency: deps.config.video.ffmpegConcurrency,
      timeoutMs: deps.config.video.ffmpegTimeoutMs,
      scratchDirectory: videoWorkRoot(deps.config.dataDir),
      onRun: deps.onMediaToolRun,
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
  const countries = ViewerCountries.open(deps.config, deps.logger);
  return {
    // Tools never started (no video processed yet) have nothing to stop.
    pipeline: new VideoPipeline({ ...deps, transcoder, stopTools: () => tools?.stop() }),
    tokens,
    origin: new VideoMediaOrigin(access, countries, deps.blobs, deps.logger),
    access,
    countries,
  };
}
