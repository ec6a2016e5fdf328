import { readBool } from "../store/codec.ts";
import type { Executor } from "../store/transactions.ts";
import type { CloudRepository, Scope } from "./repository.ts";
import type { DiskView, FloatingIpView, LoadBalancerView, VmView } from "./schemas.ts";
import type { DiskRow, FloatingIpRow, LoadBalancerRow, VmRow } from "./tables.ts";

/** VMs as the API shows them: with their disks (system disk first, then by device) and public address. */
export async function vmViews(
  repository: CloudRepository,
  executor: Executor,
  scope: Scope,
  rows: VmRow[],
): Promise<VmView[]> {
  const uuids = rows.map((row) => row.uuid);
  const disks = await repository.disksOfVms(executor, uuids);
  const publicIps = new Map<string, string>();
  for (const ip of await repository.floatingIpsOfVms(executor, scope, uuids)) {
    if (ip.assigned_to && !publicIps.has(ip.assigned_to)) publicIps.set(ip.assigned_to, ip.address);
  }
  return rows.map((row) => {
    const storage = disks
      .filter((disk) => disk.vm_uuid === row.uuid)
      .sort((a, b) => String(a.device_name).localeCompare(String(b.device_name)))
      .map((disk) => ({
        uuid: disk.uuid,
        name: disk.device_name ?? "",
        size: disk.size_gb,
        primary: readBool(disk.is_system),
        created_at: disk.attached_at ?? disk.created_at,
        user_id: disk.user_id,
      }));
    const publicIp = publicIps.get(row.uuid);
    return {
      uuid: row.uuid,
      name: row.name,
      status: row.status,
      vcpu: row.vcpu,
      memory: row.memory,
      hostname: row.hostname,
      mac: row.mac,
      os_name: row.os_name,
      os_version: row.os_version,
      private_ipv4: row.private_ipv4,
      ...(publicIp ? { public_ipv4: publicIp } : {}),
      username: row.username,
      description: row.description,
      billing_account: row.billing_account_id,
      user_id: row.user_id,
      storage,
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  });
}

export function diskView(row: DiskRow): DiskView {
  return {
    uuid: row.uuid,
    user_id: row.user_id,
    billing_account_id: row.billing_account_id,
    status: row.status,
    size_gb: row.size_gb,
    display_name: row.display_name,
    source_image_type: row.source_image_type,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function floatingIpView(row: FloatingIpRow): FloatingIpView {
  return {
    id: row.id,
    address: row.address,
    name: row.name,
    user_id: row.user_id,
    billing_account_id: row.billing_account_id,
    type: "public",
    enabled: readBool(row.enabled),
    assigned_to: row.assigned_to,
    assigned_to_resource_type: row.assigned_to_resource_type,
    assigned_to_private_ip: row.assigned_to_private_ip,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** Load balancers with their forwarding rules and targets. */
export async function loadBalancerViews(
  repository: CloudRepository,
  executor: Executor,
  rows: LoadBalancerRow[],
): Promise<LoadBalancerView[]> {
  const uuids = rows.map((row) => row.uuid);
  const rules = await repository.rulesOf(executor, uuids);
  const targets = await repository.targetsOf(executor, uuids);
  return rows.map((row) => ({
    uuid: row.uuid,
    display_name: row.display_name,
    billing_account_id: row.billing_account_id,
    private_address: row.private_address,
    user_id: row.user_id,
    forwarding_rules: rules
      .filter((rule) => rule.load_balancer_uuid === row.uuid)
      .map((rule) => ({
        uuid: rule.uuid,
        protocol: rule.protocol,
        source_port: rule.source_port,
        target_port: rule.target_port,
        created_at: rule.created_at,
      })),
    targets: targets
      .filter((target) => target.load_balancer_uuid === row.uuid)
      .map((target) => ({
        target_uuid: target.target_uuid,
        target_type: target.target_type,
        target_ip_address: target.target_ip_address,
        created_at: target.created_at,
      })),
    created_at: row.created_at,
    updated_at: row.updated_at,
  }));
}
