import type { Selectable, Updateable } from "kysely";
import type { JsonText, Timestamp } from "../store/types.ts";

export type DistributionStatus = "active" | "disabled";

export interface DistributionTable {
  id: string;
  organization_id: string;
  hostname: string;
  /** http(s) URL, or `media://<library_id>` for a library's distribution served from Cumulo's media store. */
  origin_url: string;
  default_ttl_s: number;
  status: DistributionStatus;
  library_id: string | null;
  /**
   * The random value the `_cumulo-challenge.<hostname>` TXT record must hold to prove the organization
   * controls the name; null for a library's distribution, whose name is the platform's own.
   */
  hostname_token: string | null;
  /**
   * When the host name was verified (or, when verification is off, trusted at creation); null while
   * pending, and the edge of a platform that verifies names then serves it path-style only.
   */
  hostname_verified_at: Timestamp | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export type DistributionRow = Selectable<DistributionTable>;
export type DistributionChanges = Updateable<DistributionTable>;

/** One purge request, kept as history. */
export interface PurgeTable {
  id: string;
  organization_id: string;
  distribution_id: string;
  /** JSON array of the purged paths, as given. */
  paths: JsonText;
  created_at: Timestamp;
}

export type PurgeRow = Selectable<PurgeTable>;

/**
 * Edge traffic of one distribution in one UTC minute, summed over every edge node (flushes add to
 * the row). `minute` is whole minutes since the Unix epoch, so buckets are integer arithmetic.
 */
export interface TrafficMinuteTable {
  distribution_id: string;
  organization_id: string;
  minute: number;
  requests: number;
  sent_bytes: number;
  upstream_bytes: number;
  origin_time_ms: number;
  origin_fetches: number;
  responses_2xx: number;
  responses_3xx: number;
  responses_4xx: number;
  responses_5xx: number;
}

/** The same sums over all of an organization's distributions (past ones included). */
export type OrganizationTrafficTable = Omit<TrafficMinuteTable, "distribution_id">;

/**
 * Rollups per minute, five minutes, quarter hour, hour and day, per distribution and per organization,
 * all written in the flush's transaction; in the coarser tables `minute` is the period's first minute
 * (UTC).
 */
export interface CdnTables {
  cdn_distributions: DistributionTable;
  cdn_purges: PurgeTable;
  cdn_traffic_minutes: TrafficMinuteTable;
  cdn_traffic_five_minutes: TrafficMinuteTable;
  cdn_traffic_quarter_hours: TrafficMinuteTable;
  cdn_traffic_hours: TrafficMinuteTable;
  cdn_traffic_days: TrafficMinuteTable;
  cdn_organization_traffic_minutes: OrganizationTrafficTable;
  cdn_organization_traffic_five_minutes: OrganizationTrafficTable;
  cdn_organization_traffic_quarter_hours: OrganizationTrafficTable;
  cdn_organization_traffic_hours: OrganizationTrafficTable;
  cdn_organization_traffic_days: OrganizationTrafficTable;
}
