import type { MediaDeps } from "./context.ts";
import { FolderService } from "./folder-service.ts";
import { LibraryService } from "./library-service.ts";
import { MigrationCredentialValidator } from "./migration-validator.ts";
import { PlayerService } from "./player-service.ts";
import { SubtitleService } from "./subtitle-service.ts";
import { ThumbnailService } from "./thumbnail-service.ts";
import { VideoService } from "./video-service.ts";

export interface MediaServices {
  deps: MediaDeps;
  libraries: LibraryService;
  folders: FolderService;
  videos: VideoService;
  subtitles: SubtitleService;
  thumbnails: ThumbnailService;
  players: PlayerService;
  migrations: MigrationCredentialValidator;
}

export function createMediaServices(deps: MediaDeps): MediaServices {
  const videos = new VideoService(deps);
  return {
    deps,
    libraries: new LibraryService(deps),
    folders: new FolderService(deps, videos),
    videos,
    subtitles: new SubtitleService(deps),
    thumbnails: new ThumbnailService(deps),
    players: new PlayerService(deps),
    migrations: new MigrationCredentialValidator(deps.config.providerUrls),
  };
}
