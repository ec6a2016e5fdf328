import type { Config } from "../config.ts";
import { formatDuration } from "../http/time.ts";
import { readBool, readJson } from "../store/codec.ts";
import type { VideoEventData } from "../webhooks/schemas.ts";
import type {
  AccessRule,
  Folder,
  Library,
  Player,
  SecuritySettings,
  Subtitle,
  Theme,
  Video,
} from "./schemas.ts";
import type { FolderRow, LibraryRow, PlayerRow, SubtitleRow, VideoRow } from "./tables.ts";
import { playbackUrls } from "./urls.ts";

/** Rows to the API shapes: the only place field names and encodings are translated. */

export const toLibrary = (row: LibraryRow): Library => ({
  id: row.id,
  name: row.name,
  description: row.description,
  usage_type: row.usage_type,
  default_privacy: row.default_privacy,
  status: row.status,
  region: row.region,
  distribution_id: row.distribution_id,
  organization_id: row.organization_id,
  created_by: row.created_by,
  updated_by: row.updated_by,
  created_at: row.created_at,
  updated_at: row.updated_at,
});

export const toSecurity = (row: LibraryRow): SecuritySettings => ({
  whitelist_referrers: readJson<AccessRule>(row.whitelist_referrers) as AccessRule,
  blocked_countries: readJson<AccessRule>(row.blocked_countries) as AccessRule,
  video_privacy: row.video_privacy,
});

export const toFolder = (row: FolderRow): Folder => ({
  id: row.id,
  library_id: row.library_id,
  parent_id: row.parent_id,
  name: row.name,
  created_at: row.created_at,
  updated_at: row.updated_at,
});

export const toVideo = (row: VideoRow, config: Config): Video => {
  const urls = playbackUrls(config, row);
  return {
    id: row.id,
    library_id: row.library_id,
    folder_id: row.folder_id,
    title: row.title,
    description: row.description,
    status: row.status,
    duration: Number(row.duration),
    formatted_duration: formatDuration(Number(row.duration)),
    manifest_url: urls.manifest_url,
    thumbnail_url: urls.thumbnail_url,
    thumbnail_count: Number(row.thumbnail_count),
    direct_play_url: urls.direct_play_url,
    preview_animation_thumbnail_url: urls.preview_animation_thumbnail_url,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
};

/** The video data of a webhook notification (SPEC.md "Events"); `client_id` is the organization. */
export const toVideoEventData = (row: VideoRow, config: Config): VideoEventData => {
  const urls = playbackUrls(config, row);
  return {
    status: row.status,
    duration: Number(row.duration),
    formatted_duration: formatDuration(Number(row.duration)),
    video_id: row.id,
    client_id: row.organization_id,
    libraryId: row.library_id,
    manifest_url: urls.manifest_url,
    thumbnail_url: urls.thumbnail_url,
    thumbnail_count: Number(row.thumbnail_count),
    direct_play_url: urls.direct_play_url,
    preview_animation_thumbnail_url: urls.preview_animation_thumbnail_url,
  };
};

export const toSubtitle = (row: SubtitleRow): Subtitle => ({
  id: row.id,
  video_id: row.video_id,
  title: row.title,
  language: row.language,
  path: row.path,
  created_at: row.created_at,
  updated_at: row.updated_at,
  deleted_at: row.deleted_at,
});

export const toPlayer = (row: PlayerRow): Player => ({
  id: row.id,
  library_id: row.library_id,
  name: row.name,
  theme: readJson<Theme>(row.theme) as Theme,
  is_default: readBool(row.is_default),
  created_at: row.created_at,
  updated_at: row.updated_at,
});
