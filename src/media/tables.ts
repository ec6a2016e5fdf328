import type { Insertable, Selectable, Updateable } from "kysely";
import type { Bool, JsonText, Timestamp } from "../store/types.ts";

export const LIBRARY_STATUSES = ["provisioning", "active", "failed", "deleting"] as const;
export type LibraryStatus = (typeof LIBRARY_STATUSES)[number];
export const USAGE_TYPES = ["video_on_demand", "live_streaming", "mixed"] as const;
export const DEFAULT_PRIVACIES = ["public", "private", "unlisted", "restricted"] as const;
export const VIDEO_PRIVACIES = ["public", "private", "restricted"] as const;

export interface LibraryTable {
  id: string;
  organization_id: string;
  name: string;
  description: string;
  usage_type: (typeof USAGE_TYPES)[number];
  default_privacy: (typeof DEFAULT_PRIVACIES)[number];
  status: LibraryStatus;
  region: string;
  /** Created with the library, in the same transaction (SPEC.md: a UUID, never null). */
  distribution_id: string;
  /** Security settings: access rules as JSON `{action, values, enabled}`. */
  whitelist_referrers: JsonText;
  blocked_countries: JsonText;
  /** As a request sets it (`VIDEO_PRIVACIES`), or the default privacy it was created with (`unlisted` too). */
  video_privacy: (typeof DEFAULT_PRIVACIES)[number];
  created_by: string;
  updated_by: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** `name` as search compares it (`searchKey`); the repository keeps the two together. */
  search_name: string;
}

export interface FolderTable {
  id: string;
  organization_id: string;
  library_id: string;
  parent_id: string | null;
  name: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export const VIDEO_STATUSES = [
  "created",
  "uploading",
  "processing",
  "transcoding",
  "packaging",
  "ready",
  "failed",
] as const;
export type VideoStatus = (typeof VIDEO_STATUSES)[number];

export interface VideoTable {
  id: string;
  organization_id: string;
  library_id: string;
  folder_id: string | null;
  title: string;
  description: string;
  status: VideoStatus;
  /** Whole seconds. */
  duration: number;
  manifest_url: string;
  thumbnail_url: string;
  thumbnail_count: number;
  direct_play_url: string;
  preview_animation_thumbnail_url: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SubtitleTable {
  id: string;
  organization_id: string;
  library_id: string;
  video_id: string;
  title: string;
  language: string;
  /** Blob key of the file, as stored. */
  path: string;
  format: "vtt" | "srt";
  created_at: Timestamp;
  updated_at: Timestamp;
  deleted_at: Timestamp | null;
}

export interface ThumbnailTable {
  id: string;
  organization_id: string;
  library_id: string;
  video_id: string;
  /** Blob key of the uploaded image. */
  path: string;
  content_type: string;
  size_bytes: number;
  created_at: Timestamp;
}

export interface PlayerTable {
  id: string;
  organization_id: string;
  library_id: string;
  name: string;
  theme: JsonText;
  is_default: Bool;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface MediaTables {
  libraries: LibraryTable;
  media_folders: FolderTable;
  media_videos: VideoTable;
  media_subtitles: SubtitleTable;
  media_thumbnails: ThumbnailTable;
  media_players: PlayerTable;
}

export type LibraryRow = Omit<Selectable<LibraryTable>, "search_name">;
export type FolderRow = Selectable<FolderTable>;
export type VideoRow = Selectable<VideoTable>;
export type SubtitleRow = Selectable<SubtitleTable>;
export type ThumbnailRow = Selectable<ThumbnailTable>;
export type PlayerRow = Selectable<PlayerTable>;
export type VideoChanges = Updateable<VideoTable>;
export type NewPlayerRow = Insertable<PlayerTable>;
