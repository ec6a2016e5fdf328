import type { Selectable } from "kysely";
import type { Bool, Serial, Timestamp } from "../store/types.ts";

/** What a floating IP can be assigned to (SPEC.md). */
export const FLOATING_TARGET_TYPES = ["virtual_machine", "service", "load_balancer"] as const;
export type FloatingTargetType = (typeof FLOATING_TARGET_TYPES)[number];

export interface CloudVmTable {
  uuid: string;
  organization_id: string;
  location: string;
  user_id: number;
  billing_account_id: number;
  name: string;
  description: string;
  status: string;
  vcpu: number;
  memory: number;
  hostname: string;
  mac: string;
  os_name: string;
  os_version: string;
  username: string;
  /** scrypt hash of the initial password; the password itself is never stored. */
  password_hash: string;
  public_key: string;
  private_ipv4: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface CloudDiskTable {
  uuid: string;
  organization_id: string;
  location: string;
  user_id: number;
  billing_account_id: number;
  display_name: string;
  size_gb: number;
  status: string;
  source_image_type: string;
  /** The system disk (`vda`) of a VM: it lives and dies with the VM. */
  is_system: Bool;
  vm_uuid: string | null;
  device_name: string | null;
  attached_at: Timestamp | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** Every private address in use in a location, whoever holds it (VM or load balancer). */
export interface CloudPrivateAddressTable {
  location: string;
  address: string;
  resource_type: string;
  resource_uuid: string;
}

export interface CloudFloatingIpTable {
  id: Serial;
  organization_id: string;
  location: string;
  address: string;
  name: string;
  user_id: number;
  billing_account_id: number;
  enabled: Bool;
  assigned_to: string | null;
  assigned_to_resource_type: FloatingTargetType | null;
  assigned_to_private_ip: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface CloudLoadBalancerTable {
  uuid: string;
  organization_id: string;
  location: string;
  user_id: number;
  billing_account_id: number;
  display_name: string;
  private_address: string;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface CloudLbRuleTable {
  uuid: string;
  load_balancer_uuid: string;
  protocol: string;
  source_port: number;
  target_port: number;
  created_at: Timestamp;
}

export interface CloudLbTargetTable {
  load_balancer_uuid: string;
  target_uuid: string;
  target_type: string;
  target_ip_address: string;
  created_at: Timestamp;
}

export interface CloudS3UserTable {
  organization_id: string;
  user_id: string;
  display_name: string;
  email: string;
  max_buckets: number;
  suspended: Bool;
  created_at: Timestamp;
}

export interface CloudS3KeyTable {
  access_key: string;
  organization_id: string;
  /** AES-256-GCM ciphertext of the secret key (src/secret-box.ts). */
  secret_encrypted: string;
  created_at: Timestamp;
}

export interface CloudTables {
  cloud_vms: CloudVmTable;
  cloud_disks: CloudDiskTable;
  cloud_private_addresses: CloudPrivateAddressTable;
  cloud_floating_ips: CloudFloatingIpTable;
  cloud_load_balancers: CloudLoadBalancerTable;
  cloud_lb_rules: CloudLbRuleTable;
  cloud_lb_targets: CloudLbTargetTable;
  cloud_s3_users: CloudS3UserTable;
  cloud_s3_keys: CloudS3KeyTable;
}

export type VmRow = Selectable<CloudVmTable>;
export type DiskRow = Selectable<CloudDiskTable>;
export type FloatingIpRow = Selectable<CloudFloatingIpTable>;
export type LoadBalancerRow = Selectable<CloudLoadBalancerTable>;
