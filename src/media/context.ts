import type { FileRemovals } from "../blobs/removals.ts";
import type { BlobStore } from "../blobs/store.ts";
import type { CdnService } from "../cdn/service.ts";
import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import type { JobQueue } from "../jobs/queue.ts";
import type { Transact } from "../store/transactions.ts";
import type { WebhookEmitter } from "../webhooks/emitter.ts";
import type { WebhookRepository } from "../webhooks/repository.ts";
import type { FolderRepository } from "./folder-repository.ts";
import type { PlayerRepository } from "./player-repository.ts";
import type { LibraryRepository } from "./repository.ts";
import type { VideoRepository } from "./video-repository.ts";

/** What the media services are built from (constructed once in `createServices`). */
export interface MediaDeps {
  transact: Transact;
  config: Config;
  clock: Clock;
  libraries: LibraryRepository;
  folders: FolderRepository;
  videos: VideoRepository;
  players: PlayerRepository;
  blobs: BlobStore;
  /** Removes the files of deleted or replaced items, once their change has committed. */
  removals: FileRemovals;
  cdn: CdnService;
  jobs: JobQueue;
  webhooks: WebhookEmitter;
  webhookRepository: WebhookRepository;
}
