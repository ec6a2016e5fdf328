import { type ColumnType, sql } from "kysely";
import type { Bool, JsonText, Timestamp } from "../store/types.ts";

export interface WebhookEndpointTable {
  id: string;
  organization_id: string;
  library_id: string;
  name: string;
  url: string;
  /** JSON array of subscribed event names (`*` for all). */
  events: JsonText;
  headers: JsonText | null;
  retry_policy: JsonText | null;
  secret: string;
  /** The secret before the last rotation, sealed like `secret`, while deliveries are signed with it too (migration 0704). */
  previous_secret: string | null;
  /** When `previous_secret` stops signing; null with it. */
  previous_secret_expires_at: Timestamp | null;
  is_active: Bool;
  created_by: string | null;
  updated_by: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** One notification; its id is the `webhook-id` every attempt of it carries. */
export interface WebhookMessageTable {
  id: string;
  organization_id: string;
  library_id: string;
  video_id: string | null;
  event: string;
  /** The exact JSON body sent, so every attempt signs the same bytes. */
  body: JsonText;
  created_at: Timestamp;
}

export type DeliveryState = "pending" | "sending" | "done";

/**
 * The states as literals in the SQL, never bound: both stores then match the partial indexes of
 * migration 0601, and SQLite, which reads a bound value compared with a partial index's condition
 * while it prepares a statement, does not prepare it again at every run (docs/performance.md, session 55).
 */
export const WAITING = sql.lit<DeliveryState>("pending");
export const CLAIMED = sql.lit<DeliveryState>("sending");
export const DONE = sql.lit<DeliveryState>("done");

/** One row per attempt: `pending` until the dispatcher sends it, then `done` with its outcome. */
export interface WebhookDeliveryTable {
  id: string;
  message_id: string;
  endpoint_id: string;
  organization_id: string;
  library_id: string;
  video_id: string | null;
  event: string;
  attempt: number;
  state: DeliveryState;
  due_at: Timestamp;
  locked_until: Timestamp | null;
  success: Bool;
  response_status: number | null;
  response_body: string | null;
  error: string | null;
  duration_ms: number | null;
  next_retry_at: Timestamp | null;
  /** Asked for through the retry route: sent once, never followed by a scheduled retry (migration 0400). */
  manual: ColumnType<boolean | number, boolean | undefined, boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** An endpoint a dispatcher judged slow, kept for dispatchers started later (migration 0711). */
export interface WebhookSlowEndpointTable {
  endpoint_id: string;
  slow_since: Timestamp;
}

export interface WebhookTables {
  webhook_endpoints: WebhookEndpointTable;
  webhook_messages: WebhookMessageTable;
  webhook_deliveries: WebhookDeliveryTable;
  webhook_slow_endpoints: WebhookSlowEndpointTable;
}
