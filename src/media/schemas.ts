import { type Static, type TProperties, Type } from "@sinclair/typebox";
import {
  expecting,
  NonBlankString,
  Nullable,
  PageQuery,
  StringEnum,
  TIME_OR_DAY_WORDS,
  Timestamp,
  Uuid,
} from "../http/schemas.ts";
import { COUNTRY_CODE_PATTERN } from "./countries.ts";
import {
  DEFAULT_PRIVACIES,
  LIBRARY_STATUSES,
  USAGE_TYPES,
  VIDEO_PRIVACIES,
  VIDEO_STATUSES,
} from "./tables.ts";

/** A list's query: the shared `limit` and `page`, then its filters. */
const withPaging = <P extends TProperties>(filters: P) =>
  Type.Object({ ...PageQuery.properties, ...filters });

// ---- Libraries

export const Library = Type.Object({
  id: Uuid,
  name: Type.String(),
  description: Type.String(),
  usage_type: StringEnum(USAGE_TYPES),
  default_privacy: StringEnum(DEFAULT_PRIVACIES),
  status: StringEnum(LIBRARY_STATUSES),
  region: Type.String(),
  distribution_id: Uuid,
  organization_id: Uuid,
  created_by: Uuid,
  updated_by: Nullable(Uuid),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Library = Static<typeof Library>;

export const LibraryName = NonBlankString(255);
export const LibraryDescription = Type.String({ maxLength: 2000 });

export const CreateLibraryBody = (regions: string[]) =>
  Type.Object({
    name: LibraryName,
    description: Type.Optional(LibraryDescription),
    usage_type: Type.Optional(StringEnum(USAGE_TYPES, { default: "video_on_demand" })),
    default_privacy: Type.Optional(StringEnum(DEFAULT_PRIVACIES, { default: "unlisted" })),
    region: Type.Optional(StringEnum(regions as [string, ...string[]], { description: "Configured region" })),
  });
export interface CreateLibraryInput {
  name: string;
  description?: string;
  usage_type?: (typeof USAGE_TYPES)[number];
  default_privacy?: (typeof DEFAULT_PRIVACIES)[number];
  region?: string;
}

export const UpdateLibraryBody = Type.Object({
  name: Type.Optional(LibraryName),
  description: Type.Optional(LibraryDescription),
  default_privacy: Type.Optional(StringEnum(DEFAULT_PRIVACIES)),
});
export type UpdateLibraryInput = Static<typeof UpdateLibraryBody>;

/** A timestamp (`2026-11-21T08:30:00Z`) or a whole day (`2026-11-21`). */
const TimeFilter = Type.Union([
  Type.String({ format: "date-time", ...expecting(TIME_OR_DAY_WORDS) }),
  Type.String({ format: "date", ...expecting(TIME_OR_DAY_WORDS) }),
]);

export const LibraryListQuery = withPaging({
  default_privacy: Type.Optional(StringEnum(DEFAULT_PRIVACIES)),
  created_after: Type.Optional(TimeFilter),
  created_before: Type.Optional(TimeFilter),
  search: Type.Optional(Type.String({ maxLength: 255 })),
});
export type LibraryListQuery = Static<typeof LibraryListQuery>;

// ---- Security

const AccessRule = Type.Object({
  action: StringEnum(["allow", "deny"]),
  values: Type.Array(Type.String()),
  enabled: Type.Boolean(),
});
export type AccessRule = Static<typeof AccessRule>;

export const SecuritySettings = Type.Object({
  whitelist_referrers: AccessRule,
  blocked_countries: AccessRule,
  video_privacy: StringEnum(DEFAULT_PRIVACIES),
});
export type SecuritySettings = Static<typeof SecuritySettings>;

/** A host name, optionally with a leading `*.` wildcard label. */
const REFERRER_HOST_PATTERN =
  "^(\\*\\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$";

const ruleInput = (value: ReturnType<typeof Type.String>, maxValues: number) =>
  Type.Object({
    action: StringEnum(["allow", "deny"]),
    values: Type.Array(value, { maxItems: maxValues }),
    enabled: Type.Boolean({ default: true }),
  });

/** Security settings to merge; each rule holds at most `maxValues` (`CUMULO_MAX_SECURITY_VALUES`, 100). */
export const UpdateSecurityBody = (maxValues: number) =>
  Type.Object({
    referrers: Type.Optional(
      ruleInput(
        Type.String({
          maxLength: 253,
          pattern: REFERRER_HOST_PATTERN,
          ...expecting("a host name such as example.com, optionally starting with *. (*.example.com)"),
        }),
        maxValues,
      ),
    ),
    countries: Type.Optional(
      ruleInput(
        Type.String({
          pattern: COUNTRY_CODE_PATTERN,
          ...expecting("an officially assigned ISO 3166-1 alpha-2 country code such as DE or US"),
        }),
        maxValues,
      ),
    ),
    video_privacy: Type.Optional(StringEnum(VIDEO_PRIVACIES)),
  });
export type UpdateSecurityInput = Static<ReturnType<typeof UpdateSecurityBody>>;

// ---- Folders

export const Folder = Type.Object({
  id: Uuid,
  library_id: Uuid,
  parent_id: Nullable(Uuid),
  name: Type.String(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Folder = Static<typeof Folder>;

const FolderName = NonBlankString(255);

export const CreateFolderBody = Type.Object({ name: FolderName, parent_id: Type.Optional(Nullable(Uuid)) });
export type CreateFolderInput = Static<typeof CreateFolderBody>;

export const UpdateFolderBody = Type.Object({
  name: Type.Optional(FolderName),
  parent_id: Type.Optional(Nullable(Uuid)),
});
export type UpdateFolderInput = Static<typeof UpdateFolderBody>;

export const FolderListQuery = withPaging({
  parent_id: Type.Optional(Uuid),
});
export type FolderListQuery = Static<typeof FolderListQuery>;

export const BulkDeleteFoldersBody = Type.Object({
  folder_ids: Type.Array(Uuid, { minItems: 1, maxItems: 100 }),
});
export const FolderIds = Type.Object({ folder_ids: Type.Array(Uuid) });

// ---- Videos

export const Video = Type.Object({
  id: Uuid,
  library_id: Uuid,
  folder_id: Nullable(Uuid),
  title: Type.String(),
  description: Type.String(),
  status: StringEnum(VIDEO_STATUSES),
  duration: Type.Integer(),
  formatted_duration: Type.String(),
  manifest_url: Type.String(),
  thumbnail_url: Type.String(),
  thumbnail_count: Type.Integer(),
  direct_play_url: Type.String(),
  preview_animation_thumbnail_url: Type.String(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Video = Static<typeof Video>;

const VideoTitle = NonBlankString(255);
const VideoDescription = Type.String({ maxLength: 5000 });

export const CreateVideoBody = Type.Object({
  title: VideoTitle,
  description: Type.Optional(VideoDescription),
  folder_id: Type.Optional(Nullable(Uuid)),
});
export type CreateVideoInput = Static<typeof CreateVideoBody>;

export const UpdateVideoBody = Type.Object({
  title: Type.Optional(VideoTitle),
  description: Type.Optional(VideoDescription),
  folder_id: Type.Optional(Nullable(Uuid)),
});
export type UpdateVideoInput = Static<typeof UpdateVideoBody>;

export const VideoListQuery = withPaging({
  folder_id: Type.Optional(Uuid),
  status: Type.Optional(StringEnum(VIDEO_STATUSES)),
});
export type VideoListQuery = Static<typeof VideoListQuery>;

// ---- Subtitles

export const Subtitle = Type.Object({
  id: Uuid,
  video_id: Uuid,
  title: Type.String(),
  language: Type.String(),
  path: Type.String(),
  created_at: Timestamp,
  updated_at: Timestamp,
  deleted_at: Nullable(Timestamp),
});
export type Subtitle = Static<typeof Subtitle>;

// ---- Players

export const PLAYER_CONTROLS = [
  "play",
  "progress",
  "current-time",
  "duration",
  "mute",
  "volume",
  "captions",
  "settings",
  "pip",
  "airplay",
  "fullscreen",
] as const;

const Color = Type.String({
  pattern: "^#([0-9A-Fa-f]{3}|[0-9A-Fa-f]{6})$",
  examples: ["#3b82f6"],
  ...expecting("a hex colour such as #3b82f6 or #fff"),
});

export const Theme = Type.Object({
  primary_color: Color,
  background_color: Color,
  text_color: Color,
  controls: Type.Array(StringEnum(PLAYER_CONTROLS), { uniqueItems: true, maxItems: PLAYER_CONTROLS.length }),
  autoplay: Type.Boolean(),
  loop: Type.Boolean(),
});
export type Theme = Static<typeof Theme>;

export const ThemeInput = Type.Partial(Theme);
export type ThemeInput = Static<typeof ThemeInput>;

export const Player = Type.Object({
  id: Uuid,
  library_id: Uuid,
  name: Type.String(),
  theme: Theme,
  is_default: Type.Boolean(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Player = Static<typeof Player>;

const PlayerName = NonBlankString(255);

export const CreatePlayerBody = Type.Object({ name: PlayerName, theme: Type.Optional(ThemeInput) });
export type CreatePlayerInput = Static<typeof CreatePlayerBody>;
export const UpdatePlayerBody = Type.Object({
  name: Type.Optional(PlayerName),
  theme: Type.Optional(ThemeInput),
});
export type UpdatePlayerInput = Static<typeof UpdatePlayerBody>;

// ---- Migration credential validation

export const MIGRATION_PROVIDERS = ["vimeo", "wistia", "youtube", "dailymotion", "cloudflare"] as const;

export const ValidateMigrationBody = Type.Object({
  provider: StringEnum(MIGRATION_PROVIDERS),
  credentials: Type.Object({ access_token: Type.String({ minLength: 1, maxLength: 4096 }) }),
});
export type ValidateMigrationInput = Static<typeof ValidateMigrationBody>;

export const EmptyObject = Type.Object({}, { additionalProperties: false });
