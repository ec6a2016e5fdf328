import type { Migration } from "kysely";
import { columnTypes } from "../columns.ts";
import type { DialectName } from "../database.ts";
import { identityMigration } from "./0001-identity.ts";
import { jobsMigration } from "./0002-jobs.ts";
import { cdnDistributionsMigration } from "./0003-cdn-distributions.ts";
import { webhooksMigration } from "./0004-webhooks.ts";
import { consoleUsersMigration } from "./0005-console-users.ts";
import { identityKeyNotificationsMigration } from "./0006-identity-key-notifications.ts";
import { mediaLibrariesMigration } from "./0100-media-libraries.ts";
import { mediaFoldersVideosMigration } from "./0101-media-folders-videos.ts";
import { mediaSubtitlesThumbnailsMigration } from "./0102-media-subtitles-thumbnails.ts";
import { mediaPlayersMigration } from "./0103-media-players.ts";
import { librarySearchNamesMigration } from "./0104-library-search-names.ts";
import { cloudMigration } from "./0200-cloud.ts";
import { cdnPurgesTrafficMigration } from "./0300-cdn-purges-traffic.ts";
import { cdnTrafficRetentionMigration } from "./0301-cdn-traffic-retention.ts";
import { cdnTrafficRollupsMigration } from "./0302-cdn-traffic-rollups.ts";
import { cdnTrafficFiveMinutesMigration } from "./0303-cdn-traffic-five-minutes.ts";
import { cdnLibraryDistributionIndexMigration } from "./0304-cdn-library-distribution-index.ts";
import { webhookDeliveryAttemptsMigration } from "./0400-webhook-delivery-attempts.ts";
import { videoProcessingMigration } from "./0500-video-processing.ts";
import { videoUploadsMigration } from "./0501-video-uploads.ts";
import { webhookQueueIndexesMigration } from "./0601-webhook-queue-indexes.ts";
import { webhookHeaderOrderMigration } from "./0602-webhook-header-order.ts";
import { webhookMessageLibraryIndexMigration } from "./0603-webhook-message-library-index.ts";
import { storeChangeNotificationsMigration } from "./0700-store-change-notifications.ts";
import { trafficChangeNotificationsMigration } from "./0701-traffic-change-notifications.ts";
import { videoUploadFinishingMigration } from "./0702-video-upload-finishing.ts";
import { videoUploadGenerationMigration } from "./0703-video-upload-generation.ts";
import { webhookPreviousSecretMigration } from "./0704-webhook-previous-secret.ts";
import { chosenKeyPrefixesMigration } from "./0705-chosen-key-prefixes.ts";
import { cdnHostnameVerificationMigration } from "./0706-cdn-hostname-verification.ts";
import { videoUploadsByVideoMigration } from "./0707-video-uploads-by-video.ts";
import { videoTimelineStartMigration } from "./0708-video-timeline-start.ts";
import { consoleEmailsNfcMigration } from "./0709-console-emails-nfc.ts";
import { webhookWaitingByEndpointMigration } from "./0710-webhook-waiting-by-endpoint.ts";
import { webhookEndpointSlowMigration } from "./0711-webhook-endpoint-slow.ts";

/** Every migration, by name; names sort in the order they run. Append, never edit a released one. */
export function allMigrations(dialect: DialectName): Record<string, Migration> {
  const types = columnTypes(dialect);
  return {
    "0001-identity": identityMigration(types),
    "0002-jobs": jobsMigration(types),
    "0003-cdn-distributions": cdnDistributionsMigration(types),
    "0004-webhooks": webhooksMigration(types),
    "0005-console-users": consoleUsersMigration(types),
    "0006-identity-key-notifications": identityKeyNotificationsMigration(dialect),
    "0100-media-libraries": mediaLibrariesMigration(types),
    "0101-media-folders-videos": mediaFoldersVideosMigration(types),
    "0102-media-subtitles-thumbnails": mediaSubtitlesThumbnailsMigration(types),
    "0103-media-players": mediaPlayersMigration(types),
    "0104-library-search-names": librarySearchNamesMigration(),
    "0200-cloud": cloudMigration(types),
    "0300-cdn-purges-traffic": cdnPurgesTrafficMigration(types),
    "0301-cdn-traffic-retention": cdnTrafficRetentionMigration(),
    "0302-cdn-traffic-rollups": cdnTrafficRollupsMigration(types),
    "0303-cdn-traffic-five-minutes": cdnTrafficFiveMinutesMigration(types),
    "0304-cdn-library-distribution-index": cdnLibraryDistributionIndexMigration(),
    "0400-webhook-delivery-attempts": webhookDeliveryAttemptsMigration(types),
    "0500-video-processing": videoProcessingMigration(types),
    "0501-video-uploads": videoUploadsMigration(types),
    "0601-webhook-queue-indexes": webhookQueueIndexesMigration(),
    "0602-webhook-header-order": webhookHeaderOrderMigration(dialect),
    "0603-webhook-message-library-index": webhookMessageLibraryIndexMigration(),
    "0700-store-change-notifications": storeChangeNotificationsMigration(dialect),
    "0701-traffic-change-notifications": trafficChangeNotificationsMigration(dialect),
    "0702-video-upload-finishing": videoUploadFinishingMigration(types),
    "0703-video-upload-generation": videoUploadGenerationMigration(),
    "0704-webhook-previous-secret": webhookPreviousSecretMigration(types),
    "0705-chosen-key-prefixes": chosenKeyPrefixesMigration(),
    "0706-cdn-hostname-verification": cdnHostnameVerificationMigration(types),
    "0707-video-uploads-by-video": videoUploadsByVideoMigration(),
    "0708-video-timeline-start": videoTimelineStartMigration(types),
    "0709-console-emails-nfc": consoleEmailsNfcMigration(),
    "0710-webhook-waiting-by-endpoint": webhookWaitingByEndpointMigration(),
    "0711-webhook-endpoint-slow": webhookEndpointSlowMigration(types),
  };
}

/** Every migration's name, in order: the same on both stores. */
export const migrationNames = (): string[] => Object.keys(allMigrations("sqlite"));

/**
 * Whether a start that applied `applied` made the store: every migration ran. (A store emptied of
 * its migrations table some other way is counted as new too.)
 */
export const madeNewStore = (applied: readonly string[]): boolean =>
  applied.length === migrationNames().length;

/**
 * The last migration this build knows: the store schema it runs on. Builds of one version may differ
 * in it, and nodes of different schemas must not share a store (docs/operations.md, Upgrades).
 */
export const latestMigration = (): string => migrationNames().at(-1) ?? "";
