import { type Static, Type } from "@sinclair/typebox";
import { NAMES_RESOURCE } from "../http/identifiers.ts";
import {
  expecting,
  NonBlankString,
  Nullable,
  outOfRange,
  SingleLineString,
  StringEnum,
  Timestamp,
  Uuid,
} from "../http/schemas.ts";
import { FLOATING_TARGET_TYPES } from "./tables.ts";

// Shapes follow the Warren-platform cloud API (see docs/cloud.md). Request fields are accepted
// form-urlencoded or as JSON (see coerce.ts); unknown fields are ignored.

/** Row ids are 32-bit in the store: a larger one names nothing and must not reach a query. */
export const MAX_ROW_ID = 2147483647;
const BillingAccountId = Type.Integer({
  minimum: 1,
  maximum: MAX_ROW_ID,
  description: "A billing account of your organization",
  // The words of an id in range that is not the organization's (billing.ts).
  ...outOfRange("must name a billing account of your organization"),
});
/** Any integer: one that names none of the organization's tokens (also out of the store's range) is 404. */
const TokenId = Type.Integer({ description: "A token of your organization" });
const Port = Type.Integer({ minimum: 1, maximum: 65535 });
/** Identifiers taken from bodies and queries: free text, an unknown or malformed one answers 404. */
const Ref = (description: string) =>
  Object.assign(Type.String({ minLength: 1, maxLength: 64, description }), {
    [NAMES_RESOURCE]: true as const,
  });

export const CloudSuccess = Type.Object({ success: Type.Literal(true) });

export const LocationView = Type.Object({
  slug: Type.String(),
  display_name: Type.String(),
  description: Type.String(),
  country_code: Type.String(),
  is_default: Type.Boolean(),
  is_preferred: Type.Boolean(),
  order_nr: Type.Integer(),
});

export const BillingAccountView = Type.Object({
  id: Type.Integer(),
  display_name: Type.String(),
  is_default: Type.Boolean(),
  is_active: Type.Boolean(),
  created_at: Timestamp,
});

// Tokens

const tokenFields = {
  id: Type.Integer(),
  billing_account_id: Type.Integer(),
  user_id: Type.Integer(),
  consumer_id: Uuid,
  description: Type.String(),
  restricted: Type.Boolean(),
};
const tokenTimes = {
  created_at: Type.String({ examples: ["2026-11-21 08:30:00"] }),
  updated_at: Type.String({ examples: ["2026-11-21 08:30:00"] }),
};

export const TokenView = Type.Object({ ...tokenFields, ...tokenTimes });

/** The creation's answer: the only one with the secret. */
export const CreatedTokenView = Type.Object({
  ...tokenFields,
  token: Type.String({ description: "The secret; shown only in this answer" }),
  ...tokenTimes,
});

export const CreateTokenBody = Type.Object({
  billing_account_id: Type.Optional(BillingAccountId),
  description: Type.Optional(Type.String({ maxLength: 255 })),
  restricted: Type.Optional(Type.Boolean({ description: "A restricted token cannot manage tokens" })),
});

export const UpdateTokenBody = Type.Object({
  token_id: TokenId,
  billing_account_id: Type.Optional(BillingAccountId),
  description: Type.Optional(Type.String({ maxLength: 255 })),
  restricted: Type.Optional(Type.Boolean()),
});

export const TokenIdBody = Type.Object({ token_id: Type.Optional(TokenId) });

// VMs

export const StorageView = Type.Object({
  uuid: Uuid,
  name: Type.String({ examples: ["vda"] }),
  size: Type.Integer({ description: "GB" }),
  primary: Type.Boolean(),
  created_at: Timestamp,
  user_id: Type.Integer(),
});

export const VmView = Type.Object({
  uuid: Uuid,
  name: Type.String(),
  status: Type.String({ examples: ["running", "stopped"] }),
  vcpu: Type.Integer(),
  memory: Type.Integer({ description: "MB" }),
  hostname: Type.String(),
  mac: Type.String(),
  os_name: Type.String(),
  os_version: Type.String(),
  private_ipv4: Type.String(),
  public_ipv4: Type.Optional(Type.String({ description: "Present only while a floating IP is assigned" })),
  username: Type.String(),
  description: Type.String(),
  billing_account: Type.Integer(),
  user_id: Type.Integer(),
  storage: Type.Array(StorageView),
  created_at: Timestamp,
  updated_at: Timestamp,
});

/** What a disk, floating IP or load balancer is called in listings: may be empty. */
const DisplayName = SingleLineString(255);

/** Providers name every VM (its host name comes from it): a blank name is refused like an empty one. */
const VmName = NonBlankString(64);

export const CreateVmBody = Type.Object({
  name: VmName,
  os_name: SingleLineString(64, { minLength: 1, default: "ubuntu" }),
  os_version: SingleLineString(32, { minLength: 1, default: "24.04" }),
  vcpu: Type.Integer({ minimum: 1, maximum: 64, default: 1 }),
  ram: Type.Integer({ minimum: 512, maximum: 262144, default: 1024, description: "MB" }),
  disks: Type.Integer({ minimum: 1, maximum: 16384, default: 20, description: "System disk size, GB" }),
  username: Type.String({
    minLength: 1,
    maxLength: 32,
    pattern: "^[A-Za-z_][A-Za-z0-9_.-]*$",
    default: "cumulo",
    ...expecting("a letter or _ followed by letters, digits, _ . or -"),
  }),
  password: Type.Optional(
    Type.String({ minLength: 1, maxLength: 128, description: "Stored only as a hash" }),
  ),
  public_key: Type.Optional(Type.String({ maxLength: 16384 })),
  public_keys: Type.Optional(Type.Array(Type.String({ maxLength: 16384 }), { maxItems: 20 })),
  billing_account_id: Type.Optional(BillingAccountId),
  description: Type.String({ maxLength: 1024, default: "" }),
  reserve_public_ip: Type.Boolean({ default: false }),
});

export const UpdateVmBody = Type.Object({
  uuid: Ref("VM uuid"),
  name: Type.Optional(VmName),
  vcpu: Type.Optional(Type.Integer({ minimum: 1, maximum: 64 })),
  ram: Type.Optional(Type.Integer({ minimum: 512, maximum: 262144 })),
  description: Type.Optional(Type.String({ maxLength: 1024 })),
  billing_account_id: Type.Optional(BillingAccountId),
});

export const VmUuidBody = Type.Object({ uuid: Ref("VM uuid"), force: Type.Optional(Type.Boolean()) });
export const VmUuidQuery = Type.Object({ uuid: Ref("VM uuid") });
/** `DELETE /user-resource/vm` takes `uuid` from the form, JSON or query, like the token delete. */
export const DeleteVmBody = Type.Object({
  uuid: Type.Optional(Ref("VM uuid")),
  force: Type.Optional(Type.Boolean()),
});
export const DeleteVmQuery = Type.Object({ uuid: Type.Optional(Ref("VM uuid")) });

export const AttachBody = Type.Object({ uuid: Ref("VM uuid"), storage_uuid: Ref("Disk uuid") });

export const AttachView = Type.Object({
  uuid: Uuid,
  size: Type.Integer(),
  name: Type.String({ examples: ["vdb"] }),
  primary: Type.Literal(false),
  created_at: Timestamp,
  user_id: Type.Integer(),
});

// Disks

export const DiskView = Type.Object({
  uuid: Uuid,
  user_id: Type.Integer(),
  billing_account_id: Type.Integer(),
  status: Type.String({ examples: ["Active"] }),
  size_gb: Type.Integer(),
  display_name: Type.String(),
  source_image_type: Type.String({ examples: ["EMPTY"] }),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const CreateDiskBody = Type.Object({
  size_gb: Type.Integer({ minimum: 1, maximum: 16384 }),
  billing_account_id: Type.Optional(BillingAccountId),
  display_name: Type.Optional(DisplayName),
  source_image_type: Type.Optional(StringEnum(["EMPTY"] as const)),
});

export const UpdateDiskBody = Type.Object({
  display_name: Type.Optional(DisplayName),
  billing_account_id: Type.Optional(BillingAccountId),
  size_gb: Type.Optional(Type.Integer({ minimum: 1, maximum: 16384, description: "Grow only" })),
});

// Floating IPs

export const FloatingIpView = Type.Object({
  id: Type.Integer(),
  address: Type.String({ format: "ipv4" }),
  name: Type.String(),
  user_id: Type.Integer(),
  billing_account_id: Type.Integer(),
  type: Type.Literal("public"),
  enabled: Type.Boolean(),
  assigned_to: Nullable(Type.String()),
  assigned_to_resource_type: Nullable(StringEnum(FLOATING_TARGET_TYPES)),
  assigned_to_private_ip: Nullable(Type.String()),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const CreateFloatingIpBody = Type.Object({
  billing_account_id: Type.Optional(BillingAccountId),
  name: Type.Optional(DisplayName),
});

export const UpdateFloatingIpBody = CreateFloatingIpBody;

export const FloatingIpQuery = Type.Object({
  vm_uuid: Type.Optional(
    Type.String({
      maxLength: 64,
      pattern: "^[0-9A-Za-z-]*$",
      ...expecting("a VM uuid (letters, digits and -)"),
    }),
  ),
  billing_account_id: Type.Optional(BillingAccountId),
});

export const AssignBody = Type.Object({
  assigned_to: Ref("uuid of the target"),
  assigned_to_resource_type: StringEnum(FLOATING_TARGET_TYPES),
});

// Load balancers

export const RuleView = Type.Object({
  uuid: Uuid,
  protocol: Type.String({ examples: ["TCP"] }),
  source_port: Type.Integer(),
  target_port: Type.Integer(),
  created_at: Timestamp,
});

export const TargetView = Type.Object({
  target_uuid: Uuid,
  target_type: Type.String({ examples: ["vm"] }),
  target_ip_address: Type.String({ format: "ipv4" }),
  created_at: Timestamp,
});

export const LoadBalancerView = Type.Object({
  uuid: Uuid,
  display_name: Type.String(),
  billing_account_id: Type.Integer(),
  private_address: Type.String({ format: "ipv4" }),
  user_id: Type.Integer(),
  forwarding_rules: Type.Array(RuleView),
  targets: Type.Array(TargetView),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const RuleBody = Type.Object({
  protocol: Type.Optional(
    Type.String({ pattern: "^(TCP|tcp)$", description: "TCP (the default)", ...expecting("TCP") }),
  ),
  source_port: Port,
  target_port: Port,
});

export const TargetBody = Type.Object({
  target_uuid: Ref("VM uuid"),
  target_type: StringEnum(["vm"] as const),
});

/** Forwarding rules, and targets, a load balancer may have: at its creation and added later alike. */
export const MAX_LOAD_BALANCER_RULES = 100;
export const MAX_LOAD_BALANCER_TARGETS = 100;

export const CreateLoadBalancerBody = Type.Object({
  display_name: Type.Optional(DisplayName),
  billing_account_id: Type.Optional(BillingAccountId),
  forwarding_rules: Type.Optional(Type.Array(RuleBody, { maxItems: MAX_LOAD_BALANCER_RULES })),
  rules: Type.Optional(
    Type.Array(RuleBody, { maxItems: MAX_LOAD_BALANCER_RULES, description: "Alias of forwarding_rules" }),
  ),
  targets: Type.Optional(Type.Array(TargetBody, { maxItems: MAX_LOAD_BALANCER_TARGETS })),
});

export const SetBillingBody = Type.Object({ set_id: BillingAccountId });

export const UpdateLoadBalancerBody = Type.Object({
  display_name: DisplayName,
});

// Object storage

export const S3KeyView = Type.Object({
  accessKey: Type.String(),
  secretKey: Nullable(
    Type.String({ description: "The secret; null for a read-only key (read-only keys never see secrets)" }),
  ),
  userId: Type.String(),
});

export const S3UserView = Type.Object({
  userId: Type.String(),
  displayName: Type.String(),
  email: Type.String(),
  maxBuckets: Type.Integer(),
  suspended: Type.Boolean(),
  s3Credentials: Type.Array(S3KeyView),
});

export const AccessKeyBody = Type.Object({
  access_key: Type.Optional(
    Type.String({
      maxLength: 128,
      pattern: "^[A-Za-z0-9]*$",
      ...expecting("an access key of letters and digits"),
    }),
  ),
});
export const S3Info = Type.Object({ url: Type.String() });

export type LocationView = Static<typeof LocationView>;
export type TokenView = Static<typeof TokenView>;
export type CreatedTokenView = Static<typeof CreatedTokenView>;
export type StorageView = Static<typeof StorageView>;
export type VmView = Static<typeof VmView>;
export type AttachView = Static<typeof AttachView>;
export type DiskView = Static<typeof DiskView>;
export type FloatingIpView = Static<typeof FloatingIpView>;
export type RuleView = Static<typeof RuleView>;
export type TargetView = Static<typeof TargetView>;
export type LoadBalancerView = Static<typeof LoadBalancerView>;
export type S3KeyView = Static<typeof S3KeyView>;
export type S3UserView = Static<typeof S3UserView>;
export type RuleBody = Static<typeof RuleBody>;
export type TargetBody = Static<typeof TargetBody>;
