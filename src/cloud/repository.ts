import type { Insertable, Kysely, Updateable } from "kysely";
import { isUuid } from "../ids.ts";
import type { DialectName } from "../store/database.ts";
import type { Database } from "../store/tables.ts";
import type { Executor } from "../store/transactions.ts";
import type {
  CloudDiskTable,
  CloudFloatingIpTable,
  CloudLbRuleTable,
  CloudLbTargetTable,
  CloudLoadBalancerTable,
  CloudVmTable,
  FloatingTargetType,
} from "./tables.ts";

/** Which tenant and location a query is confined to: every lookup carries both. */
export interface Scope {
  organizationId: string;
  location: string;
}

/** The condition every query of a scoped resource carries: the tenant's own rows, in one location. */
const inScope = (scope: Scope) => ({ organization_id: scope.organizationId, location: scope.location });

/**
 * Whether writing `next` over `current` changes anything: a change request that changes nothing
 * writes nothing, so a resource's `updated_at` moves only when its record changes (docs/cloud.md).
 */
export const changesRow = <Row extends object>(current: Row, next: Partial<Row>): boolean =>
  Object.entries(next).some(([field, value]) => current[field as keyof Row] !== value);

/** Every query of the cloud domain. Each one is confined to an organization (and a location). */
export class CloudRepository {
  constructor(
    readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
  ) {}

  // Private addresses (VMs and load balancers share the location's private pool)

  async privateAddressesInUse(executor: Executor, location: string): Promise<string[]> {
    const rows = await executor
      .selectFrom("cloud_private_addresses")
      .select("address")
      .where("location", "=", location)
      .execute();
    return rows.map((row) => row.address);
  }

  async claimPrivateAddress(
    executor: Executor,
    row: { location: string; address: string; resource_type: string; resource_uuid: string },
  ) {
    await executor.insertInto("cloud_private_addresses").values(row).execute();
  }

  async releasePrivateAddress(executor: Executor, location: string, resourceUuid: string) {
    await executor
      .deleteFrom("cloud_private_addresses")
      .where("location", "=", location)
      .where("resource_uuid", "=", resourceUuid)
      .execute();
  }

  // VMs

  async insertVm(executor: Executor, row: Insertable<CloudVmTable>) {
    await executor.insertInto("cloud_vms").values(row).execute();
  }

  /**
   * With `lock`, the row stays locked until the transaction ends (PostgreSQL; SQLite runs one write
   * transaction at a time): a deletion and a change that refers to the resource (a load-balancer
   * target, a floating-IP assignment) then run one after the other, so neither can leave a reference
   * to a deleted resource. Locks are taken VMs first (in uuid order), then the load balancer.
   */
  async findVm(executor: Executor, scope: Scope, uuid: string, lock = false) {
    // Identifiers from bodies are free text: one that is not a UUID names nothing.
    if (!isUuid(uuid)) return undefined;
    return executor
      .selectFrom("cloud_vms")
      .selectAll()
      .where((eb) => eb.and(inScope(scope)))
      .where("uuid", "=", uuid)
      .$if(lock && this.dialect === "postgres", (qb) => qb.forUpdate())
      .executeTakeFirst();
  }

  listVms(executor: Executor, scope: Scope) {
    return executor
      .selectFrom("cloud_vms")
      .selectAll()
      .where((eb) => eb.and(inScope(scope)))
      .orderBy("created_at", "desc")
      .orderBy("uuid")
      .execute();
  }

  async updateVm(executor: Executor, scope: Scope, uuid: string, changes: Updateable<CloudVmTable>) {
    await executor
      .updateTable("cloud_vms")
      .set(changes)
      .where((eb) => eb.and(inScope(scope)))
      .where("uuid", "=", uuid)
      .execute();
  }

  async deleteVm(executor: Executor, scope: Scope, uuid: string): Promise<boolean> {
    const result = await executor
      .deleteFrom("cloud_vms")
      .where((eb) => eb.and(inScope(scope)))
      .where("uuid", "=", uuid)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  // Disks

  async insertDisk(executor: Executor, row: Insertable<CloudDiskTable>) {
    await executor.insertInto("cloud_disks").values(row).execute();
  }

  /**
   * A block-storage disk (system disks are part of their VM and not reachable here); `lock` as for
   * `findVm` (a disk after its VM).
   */
  async findDisk(executor: Executor, scope: Scope, uuid: string, lock = false) {
    // Identifiers from bodies are free text: one that is not a UUID names nothing.
    if (!isUuid(uuid)) return undefined;
    return executor
      .selectFrom("cloud_disks")
      .selectAll()
      .where((eb) => eb.and(inScope(scope)))
      .where("uuid", "=", uuid)
      .where("is_system", "=", false)
      .$if(lock && this.dialect === "postgres", (qb) => qb.forUpdate())
      .executeTakeFirst();
  }

  listDisks(executor: Executor, scope: Scope) {
    return executor
      .selectFrom("cloud_disks")
      .selectAll()
      .where((eb) => eb.and(inScope(scope)))
      .where("is_system", "=", false)
      .orderBy("created_at", "desc")
      .orderBy("uuid")
      .execute();
  }

  /** Every disk of the VMs (system and attached), ordered by device name. */
  disksOfVms(executor: Executor, vmUuids: string[]) {
    if (vmUuids.length === 0) return Promise.resolve([]);
    return executor
      .selectFrom("cloud_disks")
      .selectAll()
      .where("vm_uuid", "in", vmUuids)
      .orderBy("device_name")
      .execute();
  }

  async updateDisk(executor: Executor, scope: Scope, uuid: string, changes: Updateable<CloudDiskTable>) {
    await executor
      .updateTable("cloud_disks")
      .set(changes)
      .where((eb) => eb.and(inScope(scope)))
      .where("uuid", "=", uuid)
      .execute();
  }

  /** Attaches only a disk that is attached nowhere: of two concurrent attaches, one wins. */
  async attachDisk(
    executor: Executor,
    scope: Scope,
    diskUuid: string,
    attachment: { vm_uuid: string; device_name: string; attached_at: string },
  ): Promise<boolean> {
    const result = await executor
      .updateTable("cloud_disks")
      .set({ ...attachment, updated_at: attachment.attached_at })
      .where((eb) => eb.and(inScope(scope)))
      .where("uuid", "=", diskUuid)
      .where("is_system", "=", false)
      .where("vm_uuid", "is", null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async detachDisk(executor: Executor, scope: Scope, diskUuid: string, vmUuid: string, now: string) {
    const result = await executor
      .updateTable("cloud_disks")
      .set({ vm_uuid: null, device_name: null, attached_at: null, updated_at: now })
      .where((eb) => eb.and(inScope(scope)))
      .where("uuid", "=", diskUuid)
      .where("vm_uuid", "=", vmUuid)
      .where("is_system", "=", false)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async deleteDisk(executor: Executor, scope: Scope, uuid: string): Promise<boolean> {
    const result = await executor
      .deleteFrom("cloud_disks")
      .where((eb) => eb.and(inScope(scope)))
      .where("uuid", "=", uuid)
      .where("vm_uuid", "is", null)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  async deleteSystemDisk(executor: Executor, vmUuid: string) {
    await executor
      .deleteFrom("cloud_disks")
      .where("vm_uuid", "=", vmUuid)
      .where("is_system", "=", true)
      .execute();
  }

  // Floating IPs

  async floatingAddressesInUse(executor: Executor, location: string): Promise<string[]> {
    const rows = await executor
      .selectFrom("cloud_floating_ips")
      .select("address")
      .where("location", "=", location)
      .execute();
    return rows.map((row) => row.address);
  }

  async countFloatingIps(executor: Executor, scope: Scope): Promise<number> {
    const row = await executor
      .selectFrom("cloud_floating_ips")
      .select((eb) => eb.fn.countAll().as("count"))
      .where((eb) => eb.and(inScope(scope)))
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /**
   * Makes the organization's address allocations run one at a time until the transaction ends, so a
   * quota counted inside one holds (PostgreSQL; SQLite runs one write transaction at a time).
   * `FOR NO KEY UPDATE` leaves alone the organization's other writes, whose foreign keys share-lock the row.
   */
  async lockOrganizationAllocations(executor: Executor, organizationId: string): Promise<void> {
    if (this.dialect !== "postgres") return;
    await executor
      .selectFrom("organizations")
      .select("id")
      .where("id", "=", organizationId)
      .forNoKeyUpdate()
      .execute();
  }

  insertFloatingIp(executor: Executor, row: Insertable<CloudFloatingIpTable>) {
    return executor.insertInto("cloud_floating_ips").values(row).returningAll().executeTakeFirstOrThrow();
  }

  /** `lock` as for `findVm` (an address after the VM or load balancer it is assigned to). */
  findFloatingIp(executor: Executor, scope: Scope, address: string, lock = false) {
    return executor
      .selectFrom("cloud_floating_ips")
      .selectAll()
      .where((eb) => eb.and(inScope(scope)))
      .where("address", "=", address)
      .$if(lock && this.dialect === "postgres", (qb) => qb.forUpdate())
      .executeTakeFirst();
  }

  listFloatingIps(
    executor: Executor,
    scope: Scope,
    filters: { vmUuid?: string | undefined; billingAccountId?: number | undefined },
  ) {
    let query = executor
      .selectFrom("cloud_floating_ips")
      .selectAll()
      .where((eb) => eb.and(inScope(scope)));
    if (filters.vmUuid !== undefined) {
      query = query
        .where("assigned_to", "=", filters.vmUuid)
        .where("assigned_to_resource_type", "=", "virtual_machine");
    }
    if (filters.billingAccountId !== undefined) {
      query = query.where("billing_account_id", "=", filters.billingAccountId);
    }
    return query.orderBy("id").execute();
  }

  /** Addresses routed to any of these VMs, lowest id first (one query for a whole list). */
  floatingIpsOfVms(executor: Executor, scope: Scope, vmUuids: string[]) {
    if (vmUuids.length === 0) return Promise.resolve([]);
    return executor
      .selectFrom("cloud_floating_ips")
      .select(["assigned_to", "address"])
      .where((eb) => eb.and(inScope(scope)))
      .where("assigned_to_resource_type", "=", "virtual_machine")
      .where("assigned_to", "in", vmUuids)
      .orderBy("id")
      .execute();
  }

  floatingIpsAssignedTo(executor: Executor, scope: Scope, targetUuid: string) {
    return executor
      .selectFrom("cloud_floating_ips")
      .selectAll()
      .where((eb) => eb.and(inScope(scope)))
      .where("assigned_to", "=", targetUuid)
      .orderBy("id")
      .execute();
  }

  async updateFloatingIp(
    executor: Executor,
    scope: Scope,
    id: number,
    changes: Updateable<CloudFloatingIpTable>,
  ) {
    await executor
      .updateTable("cloud_floating_ips")
      .set(changes)
      .where((eb) => eb.and(inScope(scope)))
      .where("id", "=", id)
      .execute();
  }

  /** Assigns only an address that is free or already on this target: of two racing assigns, one wins. */
  async assignFloatingIp(
    executor: Executor,
    scope: Scope,
    id: number,
    target: { uuid: string; type: FloatingTargetType; privateIp: string; now: string },
  ): Promise<boolean> {
    const result = await executor
      .updateTable("cloud_floating_ips")
      .set({
        assigned_to: target.uuid,
        assigned_to_resource_type: target.type,
        assigned_to_private_ip: target.privateIp,
        updated_at: target.now,
      })
      .where((eb) => eb.and(inScope(scope)))
      .where("id", "=", id)
      .where((eb) => eb.or([eb("assigned_to", "is", null), eb("assigned_to", "=", target.uuid)]))
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async unassignFloatingIpsOf(executor: Executor, scope: Scope, targetUuid: string, now: string) {
    await executor
      .updateTable("cloud_floating_ips")
      .set({
        assigned_to: null,
        assigned_to_resource_type: null,
        assigned_to_private_ip: null,
        updated_at: now,
      })
      .where((eb) => eb.and(inScope(scope)))
      .where("assigned_to", "=", targetUuid)
      .execute();
  }

  async deleteFloatingIp(executor: Executor, scope: Scope, id: number): Promise<boolean> {
    const result = await executor
      .deleteFrom("cloud_floating_ips")
      .where((eb) => eb.and(inScope(scope)))
      .where("id", "=", id)
      .where("assigned_to", "is", null)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  // Load balancers

  async insertLoadBalancer(executor: Executor, row: Insertable<CloudLoadBalancerTable>) {
    await executor.insertInto("cloud_load_balancers").values(row).execute();
  }

  /** `lock` as for `findVm`. */
  async findLoadBalancer(executor: Executor, scope: Scope, uuid: string, lock = false) {
    // Identifiers from bodies are free text: one that is not a UUID names nothing.
    if (!isUuid(uuid)) return undefined;
    return executor
      .selectFrom("cloud_load_balancers")
      .selectAll()
      .where((eb) => eb.and(inScope(scope)))
      .where("uuid", "=", uuid)
      .$if(lock && this.dialect === "postgres", (qb) => qb.forUpdate())
      .executeTakeFirst();
  }

  listLoadBalancers(executor: Executor, scope: Scope) {
    return executor
      .selectFrom("cloud_load_balancers")
      .selectAll()
      .where((eb) => eb.and(inScope(scope)))
      .orderBy("created_at", "desc")
      .orderBy("uuid")
      .execute();
  }

  async updateLoadBalancer(
    executor: Executor,
    scope: Scope,
    uuid: string,
    changes: Updateable<CloudLoadBalancerTable>,
  ) {
    await executor
      .updateTable("cloud_load_balancers")
      .set(changes)
      .where((eb) => eb.and(inScope(scope)))
      .where("uuid", "=", uuid)
      .execute();
  }

  async deleteLoadBalancer(executor: Executor, scope: Scope, uuid: string): Promise<boolean> {
    const result = await executor
      .deleteFrom("cloud_load_balancers")
      .where((eb) => eb.and(inScope(scope)))
      .where("uuid", "=", uuid)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  rulesOf(executor: Executor, lbUuids: string[]) {
    if (lbUuids.length === 0) return Promise.resolve([]);
    return executor
      .selectFrom("cloud_lb_rules")
      .selectAll()
      .where("load_balancer_uuid", "in", lbUuids)
      .orderBy("source_port")
      .execute();
  }

  targetsOf(executor: Executor, lbUuids: string[]) {
    if (lbUuids.length === 0) return Promise.resolve([]);
    return executor
      .selectFrom("cloud_lb_targets")
      .selectAll()
      .where("load_balancer_uuid", "in", lbUuids)
      .orderBy("created_at")
      .orderBy("target_uuid")
      .execute();
  }

  async insertRules(executor: Executor, rows: Insertable<CloudLbRuleTable>[]) {
    if (rows.length > 0) await executor.insertInto("cloud_lb_rules").values(rows).execute();
  }

  async insertTargets(executor: Executor, rows: Insertable<CloudLbTargetTable>[]) {
    if (rows.length > 0) await executor.insertInto("cloud_lb_targets").values(rows).execute();
  }

  async deleteRule(executor: Executor, lbUuid: string, ruleUuid: string): Promise<boolean> {
    const result = await executor
      .deleteFrom("cloud_lb_rules")
      .where("load_balancer_uuid", "=", lbUuid)
      .where("uuid", "=", ruleUuid)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  async deleteTarget(executor: Executor, lbUuid: string, targetUuid: string): Promise<boolean> {
    const result = await executor
      .deleteFrom("cloud_lb_targets")
      .where("load_balancer_uuid", "=", lbUuid)
      .where("target_uuid", "=", targetUuid)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** The load balancers (of this tenant) that route to a VM. */
  async loadBalancersTargeting(executor: Executor, scope: Scope, vmUuid: string): Promise<string[]> {
    const rows = await executor
      .selectFrom("cloud_lb_targets")
      .innerJoin("cloud_load_balancers", "cloud_load_balancers.uuid", "cloud_lb_targets.load_balancer_uuid")
      .select("cloud_load_balancers.uuid")
      .where("cloud_load_balancers.organization_id", "=", scope.organizationId)
      .where("cloud_load_balancers.location", "=", scope.location)
      .where("cloud_lb_targets.target_uuid", "=", vmUuid)
      .execute();
    return rows.map((row) => row.uuid);
  }

  // Object storage

  /** `lock` as for `findVm`: the organization's key pairs change one call at a time. */
  findS3User(executor: Executor, organizationId: string, lock = false) {
    return executor
      .selectFrom("cloud_s3_users")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .$if(lock && this.dialect === "postgres", (qb) => qb.forUpdate())
      .executeTakeFirst();
  }

  /** Creates the user unless it exists; true when this call created it. */
  async insertS3UserIfAbsent(
    executor: Executor,
    row: {
      organization_id: string;
      user_id: string;
      display_name: string;
      email: string;
      max_buckets: number;
      suspended: boolean;
      created_at: string;
    },
  ): Promise<boolean> {
    const result = await executor
      .insertInto("cloud_s3_users")
      .values(row)
      .onConflict((oc) => oc.column("organization_id").doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  async insertS3Key(
    executor: Executor,
    row: { access_key: string; organization_id: string; secret_encrypted: string; created_at: string },
  ) {
    await executor.insertInto("cloud_s3_keys").values(row).execute();
  }

  /** The key pair stored last, of any organization: what the start-up check of the secret key opens. */
  newestS3Key() {
    return this.db
      .selectFrom("cloud_s3_keys")
      .select(["access_key", "secret_encrypted"])
      .orderBy("created_at", "desc")
      .limit(1)
      .executeTakeFirst();
  }

  listS3Keys(executor: Executor, organizationId: string) {
    return executor
      .selectFrom("cloud_s3_keys")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .orderBy("created_at")
      .orderBy("access_key")
      .execute();
  }

  async deleteS3Key(executor: Executor, organizationId: string, accessKey: string): Promise<boolean> {
    const result = await executor
      .deleteFrom("cloud_s3_keys")
      .where("organization_id", "=", organizationId)
      .where("access_key", "=", accessKey)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }
}
