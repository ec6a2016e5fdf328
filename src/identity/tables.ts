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
  email: string;
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
}

export interface IdentityTables {
  organizations: OrganizationTable;
  users: UserTable;
  billing_accounts: BillingAccountTable;
  api_keys: ApiKeyTable;
}
