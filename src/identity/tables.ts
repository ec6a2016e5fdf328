import type { ColumnType, Selectable } from "kysely";
import type { Bool, Serial, Timestamp } from "../store/types.ts";

export interface OrganizationTable {
  id: string;
  name: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface UserTable {
  id: Serial;
  uuid: string;
  organization_id: string;
  name: string;
  /** Lower-case; empty for the organization's built-in user, which owns its API keys and never signs in. */
  email: string;
  /** scrypt hash (passwords.ts); null until an invited user sets a password. */
  password_hash: string | null;
  read_only: ColumnType<boolean | number, boolean | undefined, boolean>;
  created_at: Timestamp;
}

export interface BillingAccountTable {
  id: Serial;
  organization_id: string;
  display_name: string;
  is_default: Bool;
  created_at: Timestamp;
}

export type ApiKeyKind = "organization" | "cloud_token";

export interface ApiKeyTable {
  id: Serial;
  organization_id: string;
  user_id: number;
  kind: ApiKeyKind;
  name: string;
  description: string;
  prefix: string;
  key_hash: string;
  read_only: Bool;
  restricted: Bool;
  billing_account_id: number | null;
  consumer_id: string;
  created_at: Timestamp;
  updated_at: Timestamp;
  expires_at: Timestamp | null;
  revoked_at: Timestamp | null;
  /** When a request last presented the key, to the minute (IdentityService.authenticate). */
  last_used_at: ColumnType<Timestamp | null, Timestamp | null | undefined, Timestamp | null>;
}

/** A signed-in console user; the cookie's value is known only as its SHA-256. */
export interface ConsoleSessionTable {
  id: Serial;
  user_id: number;
  token_hash: string;
  created_at: Timestamp;
  /** Moved forward (at most once a minute) by requests; idle expiry counts from here. */
  last_seen_at: Timestamp;
  /** Absolute expiry, whatever the activity. */
  expires_at: Timestamp;
}

/** A one-time link that lets a user created without a password choose one. */
export interface ConsoleInvitationTable {
  id: Serial;
  user_id: number;
  token_hash: string;
  created_at: Timestamp;
  expires_at: Timestamp;
  accepted_at: Timestamp | null;
}

export interface IdentityTables {
  organizations: OrganizationTable;
  users: UserTable;
  billing_accounts: BillingAccountTable;
  api_keys: ApiKeyTable;
  console_sessions: ConsoleSessionTable;
  console_invitations: ConsoleInvitationTable;
}

export type UserRow = Selectable<UserTable>;
