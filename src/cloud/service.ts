import { randomBytes, randomUUID } from "node:crypto";
import type { Selectable } from "kysely";
import { type Clock, nowIso } from "../clock.ts";
import type { Config, Location } from "../config.ts";
import type { AuthContext, IdentityService } from "../identity/service.ts";
import { isUuid } from "../ids.ts";
import { readBool } from "../store/codec.ts";
import type { Executor } from "../store/transactions.ts";
import { lowestFree, type Pool, parsePool } from "./addresses.ts";
import { DEVICE_NAMES } from "./driver/simulated.ts";
import type { InfrastructureDriver, LoadBalancerSpec } from "./driver/types.ts";
import { Fail, type Outcome, retryOnConflict, settle } from "./outcome.ts";
import type { CloudRepository, Scope } from "./repository.ts";
import { hashPassword, type SecretBox } from "./secrets.ts";
import type { CloudDiskTable, CloudFloatingIpTable, CloudLoadBalancerTable, CloudVmTable } from "./tables.ts";

type VmRow = Selectable<CloudVmTable>;
type DiskRow = Selectable<CloudDiskTable>;
type FloatingIpRow = Selectable<CloudFloatingIpTable>;
type LoadBalancerRow = Selectable<CloudLoadBalancerTable>;

export interface StorageView {
  uuid: string;
  name: string;
  size: number;
  primary: boolean;
  created_at: string;
  user_id: number;
}

export interface VmView {
  uuid: string;
  name: string;
  status: string;
  vcpu: number;
  memory: number;
  hostname: string;
  mac: string;
  os_name: string;
  os_version: string;
  private_ipv4: string;
  public_ipv4?: string;
  username: string;
  description: string;
  billing_account: number;
  user_id: number;
  storage: StorageView[];
  created_at: string;
  updated_at: string;
}

export interface DiskView {
  uuid: string;
  user_id: number;
  billing_account_id: number;
  status: string;
  size_gb: number;
  display_name: string;
  source_image_type: string;
  created_at: string;
  updated_at: string;
}

export interface FloatingIpView {
  id: number;
  address: string;
  name: string;
  user_id: number;
  billing_account_id: number;
  type: "public";
  enabled: boolean;
  assigned_to: string | null;
  assigned_to_resource_type: string | null;
  assigned_to_private_ip: string | null;
  created_at: string;
  updated_at: string;
}

export interface RuleView {
  uuid: string;
  protocol: string;
  source_port: number;
  target_port: number;
  created_at: string;
}

export interface TargetView {
  target_uuid: string;
  target_type: string;
  target_ip_address: string;
  created_at: string;
}

export interface LoadBalancerView {
  uuid: string;
  display_name: string;
  billing_account_id: number;
  private_address: string;
  user_id: number;
  forwarding_rules: RuleView[];
  targets: TargetView[];
  created_at: string;
  updated_at: string;
}

export interface S3KeyView {
  accessKey: string;
  /** `null` for a read-only key: read-only keys never see secrets (docs/security.md). */
  secretKey: string | null;
  userId: string;
}

export interface S3UserView {
  userId: string;
  displayName: string;
  email: string;
  maxBuckets: number;
  suspended: boolean;
  s3Credentials: S3KeyView[];
}

export interface RuleInput {
  protocol?: string | undefined;
  source_port: number;
  target_port: number;
}

export interface TargetInput {
  target_uuid: string;
  target_type: string;
}

export type FloatingTargetType = "virtual_machine" | "service" | "load_balancer";

export const S3_MAX_BUCKETS = 1000;
const SUCCESS = { success: true as const };

const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const SECRET_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/** Unbiased random text from an alphabet of at most 256 characters. */
function randomText(alphabet: string, length: number): string {
  let out = "";
  const limit = 256 - (256 % alphabet.length);
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < limit && out.length < length) out += alphabet[byte % alphabet.length];
    }
  }
  return out;
}

function hostnameOf(name: string): string {
  const cleaned = name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 63)
    .replace(/-+$/, "");
  return cleaned || "vm";
}

/** The cloud control plane: every rule of VMs, disks, addresses, load balancers and object storage. */
export class CloudService {
  private readonly locations: Map<string, Location & { public: Pool; private: Pool; order: number }>;
  readonly defaultLocation: string;

  constructor(
    private readonly repository: CloudRepository,
    private readonly identity: IdentityService,
    private readonly driver: InfrastructureDriver,
    private readonly secrets: SecretBox,
    private readonly config: Config,
    private readonly clock: Clock,
  ) {
    this.locations = new Map(
      config.locations.map((location, order) => [
        location.slug,
        {
          ...location,
          public: parsePool(location.publicPool),
          private: parsePool(location.privatePool),
          order,
        },
      ]),
    );
    this.defaultLocation = config.locations[0]?.slug ?? "local-1";
  }

  hasLocation(slug: string): boolean {
    return this.locations.has(slug);
  }

  listLocations() {
    return [...this.locations.values()].map((location) => ({
      slug: location.slug,
      display_name: location.displayName,
      description: location.description,
      country_code: location.countryCode,
      is_default: location.order === 0,
      is_preferred: location.order === 0,
      order_nr: location.order,
    }));
  }

  /** The S3 endpoint: under CUMULO_PUBLIC_URL when set, else under the address the request came to. */
  s3Url(requestOrigin: string): string {
    return `${this.config.publicUrl ?? requestOrigin}/s3`;
  }

  private location(slug: string) {
    const location = this.locations.get(slug);
    if (!location) throw new Error(`unknown location ${slug}`);
    return location;
  }

  /** The billing account a new resource is charged to: the given one (if the organization's), else the key's or the default. */
  async billingAccountFor(
    auth: AuthContext,
    given: number | undefined,
    field = "billing_account_id",
  ): Promise<number> {
    if (given !== undefined) {
      if (!(await this.identity.ownsBillingAccount(auth.organizationId, given))) {
        throw Fail.invalid(field, `The ${field} field must name a billing account of your organization.`);
      }
      return given;
    }
    if (auth.billingAccountId !== null) return auth.billingAccountId;
    const fallback = await this.identity.defaultBillingAccountId(auth.organizationId);
    if (fallback === undefined) throw new Error(`organization ${auth.organizationId} has no billing account`);
    return fallback;
  }

  checkBillingAccount(auth: AuthContext, given: number | undefined): Promise<Outcome<number>> {
    return settle(() => this.billingAccountFor(auth, given));
  }

  // VMs

  private async vmViews(executor: Executor, scope: Scope, rows: VmRow[]): Promise<VmView[]> {
    const uuids = rows.map((row) => row.uuid);
    const disks = await this.repository.disksOfVms(executor, uuids);
    const publicIps = new Map<string, string>();
    for (const ip of await this.repository.floatingIpsOfVms(executor, scope, uuids)) {
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

  private async vmView(executor: Executor, scope: Scope, uuid: string): Promise<VmView> {
    const row = isUuid(uuid) ? await this.repository.findVm(executor, scope, uuid) : undefined;
    if (!row) throw Fail.notFound("Virtual machine");
    const [view] = await this.vmViews(executor, scope, [row]);
    return view as VmView;
  }

  /** `lock`: hold the row until the transaction ends (see `CloudRepository.findVm`). */
  private async requireVm(executor: Executor, scope: Scope, uuid: string, lock = false): Promise<VmRow> {
    const row = isUuid(uuid) ? await this.repository.findVm(executor, scope, uuid, lock) : undefined;
    if (!row) throw Fail.notFound("Virtual machine");
    return row;
  }

  private async allocatePrivate(executor: Executor, location: string, type: string, uuid: string) {
    const used = await this.repository.privateAddressesInUse(executor, location);
    const address = lowestFree(this.location(location).private, used);
    if (!address) throw Fail.conflict(`No private address is left in location ${location}`);
    await this.repository.claimPrivateAddress(executor, {
      location,
      address,
      resource_type: type,
      resource_uuid: uuid,
    });
    return address;
  }

  private async allocatePublic(executor: Executor, location: string): Promise<string> {
    const used = await this.repository.floatingAddressesInUse(executor, location);
    const address = lowestFree(this.location(location).public, used);
    if (!address) throw Fail.conflict(`No public IP address is left in location ${location}`);
    return address;
  }

  createVm(
    auth: AuthContext,
    location: string,
    input: {
      name: string;
      osName: string;
      osVersion: string;
      vcpu: number;
      ram: number;
      disks: number;
      username: string;
      password: string | undefined;
      publicKeys: string[];
      billingAccountId: number | undefined;
      description: string;
      reservePublicIp: boolean;
    },
  ): Promise<Outcome<VmView>> {
    return settle(async () => {
      const scope = { organizationId: auth.organizationId, location };
      const billing = await this.billingAccountFor(auth, input.billingAccountId);
      const passwordHash = input.password ? await hashPassword(input.password) : "";
      return retryOnConflict(() =>
        this.repository.transaction(async (trx) => {
          const uuid = randomUUID();
          const diskUuid = randomUUID();
          const now = nowIso(this.clock);
          const hostname = hostnameOf(input.name);
          const privateIpv4 = await this.allocatePrivate(trx, location, "virtual_machine", uuid);
          const created = await this.driver.createVm({
            location,
            uuid,
            name: input.name,
            hostname,
            vcpu: input.vcpu,
            memoryMb: input.ram,
            osName: input.osName,
            osVersion: input.osVersion,
            username: input.username,
            password: input.password,
            publicKeys: input.publicKeys,
            privateIpv4,
            systemDisk: { uuid: diskUuid, sizeGb: input.disks, device: "vda" },
          });
          await this.repository.insertVm(trx, {
            uuid,
            organization_id: auth.organizationId,
            location,
            user_id: auth.userId,
            billing_account_id: billing,
            name: input.name,
            description: input.description,
            status: created.status,
            vcpu: input.vcpu,
            memory: input.ram,
            hostname,
            mac: created.mac,
            os_name: input.osName,
            os_version: input.osVersion,
            username: input.username,
            password_hash: passwordHash,
            public_key: input.publicKeys.join("\n"),
            private_ipv4: privateIpv4,
            created_at: now,
            updated_at: now,
          });
          await this.repository.insertDisk(trx, {
            uuid: diskUuid,
            organization_id: auth.organizationId,
            location,
            user_id: auth.userId,
            billing_account_id: billing,
            display_name: `${input.name} system disk`,
            size_gb: input.disks,
            status: "Active",
            source_image_type: "OS_BASE",
            is_system: true,
            vm_uuid: uuid,
            device_name: "vda",
            attached_at: now,
            created_at: now,
            updated_at: now,
          });
          if (input.reservePublicIp) {
            const address = await this.allocatePublic(trx, location);
            await this.repository.insertFloatingIp(trx, {
              organization_id: auth.organizationId,
              location,
              address,
              name: input.name,
              user_id: auth.userId,
              billing_account_id: billing,
              enabled: true,
              assigned_to: uuid,
              assigned_to_resource_type: "virtual_machine",
              assigned_to_private_ip: privateIpv4,
              created_at: now,
              updated_at: now,
            });
            await this.driver.routeFloatingIp(location, address, privateIpv4);
          }
          return this.vmView(trx, scope, uuid);
        }),
      );
    });
  }

  getVm(auth: AuthContext, location: string, uuid: string): Promise<Outcome<VmView>> {
    return settle(() =>
      this.vmView(this.repository.db, { organizationId: auth.organizationId, location }, uuid),
    );
  }

  async listVms(auth: AuthContext, location: string): Promise<VmView[]> {
    const scope = { organizationId: auth.organizationId, location };
    const rows = await this.repository.listVms(this.repository.db, scope);
    return this.vmViews(this.repository.db, scope, rows);
  }

  updateVm(
    auth: AuthContext,
    location: string,
    uuid: string,
    changes: {
      name?: string | undefined;
      vcpu?: number | undefined;
      ram?: number | undefined;
      description?: string | undefined;
    },
  ): Promise<Outcome<VmView>> {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      this.repository.transaction(async (trx) => {
        const vm = await this.requireVm(trx, scope, uuid);
        const vcpu = changes.vcpu ?? vm.vcpu;
        const memory = changes.ram ?? vm.memory;
        if (vcpu !== vm.vcpu || memory !== vm.memory) {
          await this.driver.resizeVm(location, uuid, { vcpu, memoryMb: memory });
        }
        await this.repository.updateVm(trx, scope, uuid, {
          name: changes.name ?? vm.name,
          hostname: changes.name !== undefined ? hostnameOf(changes.name) : vm.hostname,
          description: changes.description ?? vm.description,
          vcpu,
          memory,
          updated_at: nowIso(this.clock),
        });
        return this.vmView(trx, scope, uuid);
      }),
    );
  }

  setPower(auth: AuthContext, location: string, uuid: string, state: "running" | "stopped") {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      this.repository.transaction(async (trx) => {
        const vm = await this.requireVm(trx, scope, uuid);
        if (vm.status !== state) {
          const status = await this.driver.setPower(location, uuid, state);
          await this.repository.updateVm(trx, scope, uuid, { status, updated_at: nowIso(this.clock) });
        }
        return this.vmView(trx, scope, uuid);
      }),
    );
  }

  /** Deletes a VM: data disks are detached (kept), its addresses released, and it leaves every load balancer. */
  deleteVm(auth: AuthContext, location: string, uuid: string) {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      this.repository.transaction(async (trx) => {
        await this.requireVm(trx, scope, uuid, true);
        const now = nowIso(this.clock);
        const disks = await this.repository.disksOfVms(trx, [uuid]);
        for (const disk of disks) {
          if (readBool(disk.is_system)) continue;
          await this.driver.detachDisk(location, uuid, disk.uuid, disk.device_name ?? "");
          await this.repository.detachDisk(trx, scope, disk.uuid, uuid, now);
        }
        await this.unassignAll(trx, scope, uuid, now);
        for (const lbUuid of await this.repository.loadBalancersTargeting(trx, scope, uuid)) {
          await this.repository.deleteTarget(trx, lbUuid, uuid);
          await this.driver.applyLoadBalancer(await this.lbSpec(trx, scope, lbUuid));
        }
        await this.repository.deleteSystemDisk(trx, uuid);
        await this.repository.releasePrivateAddress(trx, location, uuid);
        await this.repository.deleteVm(trx, scope, uuid);
        await this.driver.deleteVm(location, uuid);
        return SUCCESS;
      }),
    );
  }

  private async unassignAll(executor: Executor, scope: Scope, targetUuid: string, now: string) {
    for (const ip of await this.repository.floatingIpsAssignedTo(executor, scope, targetUuid)) {
      await this.driver.routeFloatingIp(scope.location, ip.address, null);
    }
    await this.repository.unassignFloatingIpsOf(executor, scope, targetUuid, now);
  }

  // Disks

  private diskView(row: DiskRow): DiskView {
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

  private async requireDisk(executor: Executor, scope: Scope, uuid: string): Promise<DiskRow> {
    const row = isUuid(uuid) ? await this.repository.findDisk(executor, scope, uuid) : undefined;
    if (!row) throw Fail.notFound("Disk");
    return row;
  }

  createDisk(
    auth: AuthContext,
    location: string,
    input: { sizeGb: number; billingAccountId: number | undefined; displayName: string | undefined },
  ): Promise<Outcome<DiskView>> {
    const scope = { organizationId: auth.organizationId, location };
    return settle(async () => {
      const billing = await this.billingAccountFor(auth, input.billingAccountId);
      return this.repository.transaction(async (trx) => {
        const uuid = randomUUID();
        const now = nowIso(this.clock);
        await this.driver.createDisk(location, uuid, input.sizeGb);
        await this.repository.insertDisk(trx, {
          uuid,
          organization_id: auth.organizationId,
          location,
          user_id: auth.userId,
          billing_account_id: billing,
          display_name: input.displayName ?? "",
          size_gb: input.sizeGb,
          status: "Active",
          source_image_type: "EMPTY",
          is_system: false,
          vm_uuid: null,
          device_name: null,
          attached_at: null,
          created_at: now,
          updated_at: now,
        });
        return this.diskView(await this.requireDisk(trx, scope, uuid));
      });
    });
  }

  async listDisks(auth: AuthContext, location: string): Promise<DiskView[]> {
    const rows = await this.repository.listDisks(this.repository.db, {
      organizationId: auth.organizationId,
      location,
    });
    return rows.map((row) => this.diskView(row));
  }

  getDisk(auth: AuthContext, location: string, uuid: string): Promise<Outcome<DiskView>> {
    return settle(async () =>
      this.diskView(
        await this.requireDisk(this.repository.db, { organizationId: auth.organizationId, location }, uuid),
      ),
    );
  }

  updateDisk(
    auth: AuthContext,
    location: string,
    uuid: string,
    changes: {
      displayName?: string | undefined;
      billingAccountId?: number | undefined;
      sizeGb?: number | undefined;
    },
  ): Promise<Outcome<DiskView>> {
    const scope = { organizationId: auth.organizationId, location };
    return settle(async () => {
      const billing =
        changes.billingAccountId !== undefined
          ? await this.billingAccountFor(auth, changes.billingAccountId)
          : undefined;
      return this.repository.transaction(async (trx) => {
        const disk = await this.requireDisk(trx, scope, uuid);
        if (changes.sizeGb !== undefined && changes.sizeGb < disk.size_gb) {
          throw Fail.invalid("size_gb", "The size_gb field cannot be smaller than the disk's current size.");
        }
        await this.repository.updateDisk(trx, scope, uuid, {
          display_name: changes.displayName ?? disk.display_name,
          billing_account_id: billing ?? disk.billing_account_id,
          size_gb: changes.sizeGb ?? disk.size_gb,
          updated_at: nowIso(this.clock),
        });
        return this.diskView(await this.requireDisk(trx, scope, uuid));
      });
    });
  }

  deleteDisk(auth: AuthContext, location: string, uuid: string) {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      this.repository.transaction(async (trx) => {
        const disk = await this.requireDisk(trx, scope, uuid);
        if (disk.vm_uuid !== null)
          throw Fail.conflict("Disk is attached to a virtual machine; detach it first");
        if (!(await this.repository.deleteDisk(trx, scope, uuid))) {
          throw Fail.conflict("Disk is attached to a virtual machine; detach it first");
        }
        await this.driver.deleteDisk(location, uuid);
        return SUCCESS;
      }),
    );
  }

  attachDisk(
    auth: AuthContext,
    location: string,
    vmUuid: string,
    diskUuid: string,
  ): Promise<Outcome<StorageView & { primary: false }>> {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      retryOnConflict(() =>
        this.repository.transaction(async (trx) => {
          await this.requireVm(trx, scope, vmUuid);
          const disk = await this.requireDisk(trx, scope, diskUuid);
          if (disk.vm_uuid !== null) throw Fail.conflict("Disk is already attached to a virtual machine");
          const used = new Set(
            (await this.repository.disksOfVms(trx, [vmUuid])).map((row) => row.device_name),
          );
          const device = DEVICE_NAMES.find((name) => name !== "vda" && !used.has(name));
          if (!device) throw Fail.conflict("The virtual machine has no free device name left");
          const now = nowIso(this.clock);
          const attached = await this.repository.attachDisk(trx, scope, diskUuid, {
            vm_uuid: vmUuid,
            device_name: device,
            attached_at: now,
          });
          if (!attached) throw Fail.conflict("Disk is already attached to a virtual machine");
          await this.driver.attachDisk(location, vmUuid, diskUuid, device);
          return {
            uuid: diskUuid,
            size: disk.size_gb,
            name: device,
            primary: false as const,
            created_at: now,
            user_id: disk.user_id,
          };
        }),
      ),
    );
  }

  detachDisk(auth: AuthContext, location: string, vmUuid: string, diskUuid: string) {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      this.repository.transaction(async (trx) => {
        await this.requireVm(trx, scope, vmUuid);
        const disk = await this.requireDisk(trx, scope, diskUuid);
        if (!(await this.repository.detachDisk(trx, scope, diskUuid, vmUuid, nowIso(this.clock)))) {
          throw Fail.conflict("Disk is not attached to this virtual machine");
        }
        await this.driver.detachDisk(location, vmUuid, diskUuid, disk.device_name ?? "");
        return SUCCESS;
      }),
    );
  }

  // Floating IPs

  private ipView(row: FloatingIpRow): FloatingIpView {
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

  private async requireIp(executor: Executor, scope: Scope, address: string): Promise<FloatingIpRow> {
    const row = await this.repository.findFloatingIp(executor, scope, address);
    if (!row) throw Fail.notFound("IP address");
    return row;
  }

  allocateFloatingIp(
    auth: AuthContext,
    location: string,
    input: { billingAccountId: number | undefined; name: string | undefined },
  ): Promise<Outcome<FloatingIpView>> {
    return settle(async () => {
      const billing = await this.billingAccountFor(auth, input.billingAccountId);
      return retryOnConflict(() =>
        this.repository.transaction(async (trx) => {
          const address = await this.allocatePublic(trx, location);
          const now = nowIso(this.clock);
          const row = await this.repository.insertFloatingIp(trx, {
            organization_id: auth.organizationId,
            location,
            address,
            name: input.name ?? "",
            user_id: auth.userId,
            billing_account_id: billing,
            enabled: true,
            assigned_to: null,
            assigned_to_resource_type: null,
            assigned_to_private_ip: null,
            created_at: now,
            updated_at: now,
          });
          return this.ipView(row);
        }),
      );
    });
  }

  async listFloatingIps(
    auth: AuthContext,
    location: string,
    filters: { vmUuid?: string | undefined; billingAccountId?: number | undefined },
  ): Promise<FloatingIpView[]> {
    if (filters.vmUuid !== undefined && !isUuid(filters.vmUuid)) return [];
    const rows = await this.repository.listFloatingIps(
      this.repository.db,
      { organizationId: auth.organizationId, location },
      filters,
    );
    return rows.map((row) => this.ipView(row));
  }

  getFloatingIp(auth: AuthContext, location: string, address: string): Promise<Outcome<FloatingIpView>> {
    return settle(async () =>
      this.ipView(
        await this.requireIp(this.repository.db, { organizationId: auth.organizationId, location }, address),
      ),
    );
  }

  updateFloatingIp(
    auth: AuthContext,
    location: string,
    address: string,
    changes: { name?: string | undefined; billingAccountId?: number | undefined },
  ): Promise<Outcome<FloatingIpView>> {
    const scope = { organizationId: auth.organizationId, location };
    return settle(async () => {
      const billing =
        changes.billingAccountId !== undefined
          ? await this.billingAccountFor(auth, changes.billingAccountId)
          : undefined;
      return this.repository.transaction(async (trx) => {
        const ip = await this.requireIp(trx, scope, address);
        await this.repository.updateFloatingIp(trx, scope, ip.id, {
          name: changes.name ?? ip.name,
          billing_account_id: billing ?? ip.billing_account_id,
          updated_at: nowIso(this.clock),
        });
        return this.ipView(await this.requireIp(trx, scope, address));
      });
    });
  }

  deleteFloatingIp(auth: AuthContext, location: string, address: string) {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      this.repository.transaction(async (trx) => {
        const ip = await this.requireIp(trx, scope, address);
        if (ip.assigned_to !== null || !(await this.repository.deleteFloatingIp(trx, scope, ip.id))) {
          throw Fail.conflict("IP address is assigned to a resource; unassign it first");
        }
        return SUCCESS;
      }),
    );
  }

  /** The private address a floating IP of this target type would route to, or 404. */
  private async targetAddress(executor: Executor, scope: Scope, type: FloatingTargetType, uuid: string) {
    if (type === "virtual_machine") {
      return (await this.requireVm(executor, scope, uuid, true)).private_ipv4;
    }
    if (type === "load_balancer") {
      return (await this.requireLb(executor, scope, uuid, true)).private_address;
    }
    // Cumulo runs no managed services, so no service can be a target.
    throw Fail.notFound("Service");
  }

  assignFloatingIp(
    auth: AuthContext,
    location: string,
    address: string,
    target: { uuid: string; type: FloatingTargetType },
  ): Promise<Outcome<FloatingIpView>> {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      this.repository.transaction(async (trx) => {
        const ip = await this.requireIp(trx, scope, address);
        const privateIp = await this.targetAddress(trx, scope, target.type, target.uuid);
        if (ip.assigned_to === target.uuid && ip.assigned_to_resource_type === target.type)
          return this.ipView(ip);
        if (ip.assigned_to !== null)
          throw Fail.conflict("IP address is already assigned to another resource");
        const assigned = await this.repository.assignFloatingIp(trx, scope, ip.id, {
          uuid: target.uuid,
          type: target.type,
          privateIp,
          now: nowIso(this.clock),
        });
        if (!assigned) throw Fail.conflict("IP address is already assigned to another resource");
        await this.driver.routeFloatingIp(location, address, privateIp);
        return this.ipView(await this.requireIp(trx, scope, address));
      }),
    );
  }

  unassignFloatingIp(auth: AuthContext, location: string, address: string): Promise<Outcome<FloatingIpView>> {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      this.repository.transaction(async (trx) => {
        const ip = await this.requireIp(trx, scope, address);
        if (ip.assigned_to !== null) {
          await this.repository.updateFloatingIp(trx, scope, ip.id, {
            assigned_to: null,
            assigned_to_resource_type: null,
            assigned_to_private_ip: null,
            updated_at: nowIso(this.clock),
          });
          await this.driver.routeFloatingIp(location, address, null);
        }
        return this.ipView(await this.requireIp(trx, scope, address));
      }),
    );
  }

  // Load balancers

  private async lbViews(executor: Executor, rows: LoadBalancerRow[]): Promise<LoadBalancerView[]> {
    const uuids = rows.map((row) => row.uuid);
    const rules = await this.repository.rulesOf(executor, uuids);
    const targets = await this.repository.targetsOf(executor, uuids);
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

  private async requireLb(
    executor: Executor,
    scope: Scope,
    uuid: string,
    lock = false,
  ): Promise<LoadBalancerRow> {
    const row = isUuid(uuid)
      ? await this.repository.findLoadBalancer(executor, scope, uuid, lock)
      : undefined;
    if (!row) throw Fail.notFound("Load balancer");
    return row;
  }

  private async lbView(executor: Executor, scope: Scope, uuid: string): Promise<LoadBalancerView> {
    const [view] = await this.lbViews(executor, [await this.requireLb(executor, scope, uuid)]);
    return view as LoadBalancerView;
  }

  private async lbSpec(executor: Executor, scope: Scope, uuid: string): Promise<LoadBalancerSpec> {
    const view = await this.lbView(executor, scope, uuid);
    return {
      location: scope.location,
      uuid,
      privateAddress: view.private_address,
      rules: view.forwarding_rules.map((rule) => ({
        uuid: rule.uuid,
        protocol: rule.protocol,
        sourcePort: rule.source_port,
        targetPort: rule.target_port,
      })),
      targets: view.targets.map((target) => ({
        uuid: target.target_uuid,
        ipAddress: target.target_ip_address,
      })),
    };
  }

  /** The VMs named as targets, each once, with their private addresses; an unknown one is 404. */
  private async resolveTargets(executor: Executor, scope: Scope, targets: TargetInput[]) {
    const resolved = new Map<string, { uuid: string; type: string; ip: string }>();
    // Lock in one order, so that two calls naming the same VMs cannot wait for each other.
    for (const uuid of [...new Set(targets.map((target) => target.target_uuid))].sort()) {
      await this.requireVm(executor, scope, uuid, true);
    }
    for (const target of targets) {
      const vm = await this.requireVm(executor, scope, target.target_uuid);
      resolved.set(vm.uuid, { uuid: vm.uuid, type: target.target_type, ip: vm.private_ipv4 });
    }
    return [...resolved.values()];
  }

  createLoadBalancer(
    auth: AuthContext,
    location: string,
    input: {
      displayName: string | undefined;
      billingAccountId: number | undefined;
      rules: RuleInput[];
      rulesField: string;
      targets: TargetInput[];
    },
  ): Promise<Outcome<LoadBalancerView>> {
    const scope = { organizationId: auth.organizationId, location };
    return settle(async () => {
      const ports = new Set<number>();
      for (const rule of input.rules) {
        if (ports.has(rule.source_port)) {
          throw Fail.invalid(
            input.rulesField,
            `Source port ${rule.source_port} is used by more than one rule.`,
          );
        }
        ports.add(rule.source_port);
      }
      const billing = await this.billingAccountFor(auth, input.billingAccountId);
      return retryOnConflict(() =>
        this.repository.transaction(async (trx) => {
          const targets = await this.resolveTargets(trx, scope, input.targets);
          const uuid = randomUUID();
          const now = nowIso(this.clock);
          const privateAddress = await this.allocatePrivate(trx, location, "load_balancer", uuid);
          await this.repository.insertLoadBalancer(trx, {
            uuid,
            organization_id: auth.organizationId,
            location,
            user_id: auth.userId,
            billing_account_id: billing,
            display_name: input.displayName ?? "",
            private_address: privateAddress,
            created_at: now,
            updated_at: now,
          });
          await this.repository.insertRules(
            trx,
            input.rules.map((rule) => ({
              uuid: randomUUID(),
              load_balancer_uuid: uuid,
              protocol: (rule.protocol ?? "TCP").toUpperCase(),
              source_port: rule.source_port,
              target_port: rule.target_port,
              created_at: now,
            })),
          );
          await this.repository.insertTargets(
            trx,
            targets.map((target) => ({
              load_balancer_uuid: uuid,
              target_uuid: target.uuid,
              target_type: target.type,
              target_ip_address: target.ip,
              created_at: now,
            })),
          );
          await this.driver.applyLoadBalancer(await this.lbSpec(trx, scope, uuid));
          return this.lbView(trx, scope, uuid);
        }),
      );
    });
  }

  async listLoadBalancers(auth: AuthContext, location: string): Promise<LoadBalancerView[]> {
    const rows = await this.repository.listLoadBalancers(this.repository.db, {
      organizationId: auth.organizationId,
      location,
    });
    return this.lbViews(this.repository.db, rows);
  }

  getLoadBalancer(auth: AuthContext, location: string, uuid: string): Promise<Outcome<LoadBalancerView>> {
    return settle(() =>
      this.lbView(this.repository.db, { organizationId: auth.organizationId, location }, uuid),
    );
  }

  updateLoadBalancer(
    auth: AuthContext,
    location: string,
    uuid: string,
    changes: { displayName?: string | undefined },
  ): Promise<Outcome<LoadBalancerView>> {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      this.repository.transaction(async (trx) => {
        const lb = await this.requireLb(trx, scope, uuid);
        await this.repository.updateLoadBalancer(trx, scope, uuid, {
          display_name: changes.displayName ?? lb.display_name,
          updated_at: nowIso(this.clock),
        });
        return this.lbView(trx, scope, uuid);
      }),
    );
  }

  setLoadBalancerBilling(
    auth: AuthContext,
    location: string,
    uuid: string,
    billingAccountId: number,
  ): Promise<Outcome<LoadBalancerView>> {
    const scope = { organizationId: auth.organizationId, location };
    return settle(async () => {
      const billing = await this.billingAccountFor(auth, billingAccountId, "set_id");
      return this.repository.transaction(async (trx) => {
        await this.requireLb(trx, scope, uuid);
        await this.repository.updateLoadBalancer(trx, scope, uuid, {
          billing_account_id: billing,
          updated_at: nowIso(this.clock),
        });
        return this.lbView(trx, scope, uuid);
      });
    });
  }

  deleteLoadBalancer(auth: AuthContext, location: string, uuid: string) {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      this.repository.transaction(async (trx) => {
        await this.requireLb(trx, scope, uuid, true);
        await this.unassignAll(trx, scope, uuid, nowIso(this.clock));
        await this.repository.releasePrivateAddress(trx, location, uuid);
        await this.repository.deleteLoadBalancer(trx, scope, uuid);
        await this.driver.deleteLoadBalancer(location, uuid);
        return SUCCESS;
      }),
    );
  }

  private async touchLb(executor: Executor, scope: Scope, uuid: string) {
    await this.repository.updateLoadBalancer(executor, scope, uuid, { updated_at: nowIso(this.clock) });
    await this.driver.applyLoadBalancer(await this.lbSpec(executor, scope, uuid));
  }

  addTarget(
    auth: AuthContext,
    location: string,
    uuid: string,
    target: TargetInput,
  ): Promise<Outcome<TargetView>> {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      retryOnConflict(() =>
        this.repository.transaction(async (trx) => {
          await this.requireLb(trx, scope, uuid);
          const vm = await this.requireVm(trx, scope, target.target_uuid, true);
          await this.requireLb(trx, scope, uuid, true);
          const existing = (await this.lbView(trx, scope, uuid)).targets.find(
            (t) => t.target_uuid === vm.uuid,
          );
          if (existing) return existing;
          const now = nowIso(this.clock);
          const row = {
            load_balancer_uuid: uuid,
            target_uuid: vm.uuid,
            target_type: target.target_type,
            target_ip_address: vm.private_ipv4,
            created_at: now,
          };
          await this.repository.insertTargets(trx, [row]);
          await this.touchLb(trx, scope, uuid);
          return {
            target_uuid: row.target_uuid,
            target_type: row.target_type,
            target_ip_address: row.target_ip_address,
            created_at: now,
          };
        }),
      ),
    );
  }

  removeTarget(auth: AuthContext, location: string, uuid: string, targetUuid: string) {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      this.repository.transaction(async (trx) => {
        await this.requireLb(trx, scope, uuid, true);
        if (!(await this.repository.deleteTarget(trx, uuid, targetUuid))) throw Fail.notFound("Target");
        await this.touchLb(trx, scope, uuid);
        return SUCCESS;
      }),
    );
  }

  addRule(auth: AuthContext, location: string, uuid: string, rule: RuleInput): Promise<Outcome<RuleView>> {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      retryOnConflict(() =>
        this.repository.transaction(async (trx) => {
          await this.requireLb(trx, scope, uuid, true);
          const view = await this.lbView(trx, scope, uuid);
          if (view.forwarding_rules.some((existing) => existing.source_port === rule.source_port)) {
            throw Fail.invalid(
              "source_port",
              `Source port ${rule.source_port} is already used by another rule.`,
            );
          }
          const row = {
            uuid: randomUUID(),
            load_balancer_uuid: uuid,
            protocol: (rule.protocol ?? "TCP").toUpperCase(),
            source_port: rule.source_port,
            target_port: rule.target_port,
            created_at: nowIso(this.clock),
          };
          await this.repository.insertRules(trx, [row]);
          await this.touchLb(trx, scope, uuid);
          return {
            uuid: row.uuid,
            protocol: row.protocol,
            source_port: row.source_port,
            target_port: row.target_port,
            created_at: row.created_at,
          };
        }),
      ),
    );
  }

  removeRule(auth: AuthContext, location: string, uuid: string, ruleUuid: string) {
    const scope = { organizationId: auth.organizationId, location };
    return settle(() =>
      this.repository.transaction(async (trx) => {
        await this.requireLb(trx, scope, uuid, true);
        if (!(await this.repository.deleteRule(trx, uuid, ruleUuid))) throw Fail.notFound("Forwarding rule");
        await this.touchLb(trx, scope, uuid);
        return SUCCESS;
      }),
    );
  }

  // Object storage

  /** Creates the organization's object-storage user and its first key pair unless it exists. */
  private async ensureS3User(executor: Executor, organizationId: string, displayName: string): Promise<void> {
    if (await this.repository.findS3User(executor, organizationId)) return;
    const now = nowIso(this.clock);
    // Of two concurrent first calls, one inserts; the other waits for it and inserts nothing.
    const created = await this.repository.insertS3UserIfAbsent(executor, {
      organization_id: organizationId,
      user_id: randomUUID(),
      display_name: displayName,
      email: "",
      max_buckets: S3_MAX_BUCKETS,
      suspended: false,
      created_at: now,
    });
    if (created) await this.insertKey(executor, organizationId, now);
  }

  private async s3DisplayName(organizationId: string): Promise<string> {
    return (await this.identity.organizationName(organizationId)) ?? organizationId;
  }

  private async insertKey(executor: Executor, organizationId: string, now: string) {
    const accessKey = randomText(ALPHANUMERIC, 20);
    await this.repository.insertS3Key(executor, {
      access_key: accessKey,
      organization_id: organizationId,
      secret_encrypted: this.secrets.seal(randomText(SECRET_ALPHABET, 40), accessKey),
      created_at: now,
    });
  }

  private async keyViews(executor: Executor, auth: AuthContext): Promise<S3KeyView[]> {
    const user = await this.repository.findS3User(executor, auth.organizationId);
    if (!user) return [];
    const keys = await this.repository.listS3Keys(executor, auth.organizationId);
    return keys.map((key) => ({
      accessKey: key.access_key,
      secretKey: auth.readOnly ? null : this.secrets.open(key.secret_encrypted, key.access_key),
      userId: user.user_id,
    }));
  }

  private async s3UserView(executor: Executor, auth: AuthContext): Promise<S3UserView | undefined> {
    const user = await this.repository.findS3User(executor, auth.organizationId);
    if (!user) return undefined;
    return {
      userId: user.user_id,
      displayName: user.display_name,
      email: user.email,
      maxBuckets: user.max_buckets,
      suspended: readBool(user.suspended),
      s3Credentials: await this.keyViews(executor, auth),
    };
  }

  /**
   * The organization's object-storage user, created with one key pair on first use; when every key
   * pair has been deleted, a new one is generated (SPEC.md: "when the user or keys do not exist
   * they are generated"). A read-only key creates nothing: it sees the user as it is, and a user
   * that does not exist yet is forbidden to it.
   */
  async s3User(auth: AuthContext): Promise<Outcome<S3UserView>> {
    if (auth.readOnly) {
      const existing = await this.s3UserView(this.repository.db, auth);
      if (existing) return { ok: true, value: existing };
      return {
        ok: false,
        failure: { kind: "forbidden", message: "A read-only key cannot create the object-storage user" },
      };
    }
    // Read before the transaction: on SQLite a query outside it would wait for its connection.
    const displayName = await this.s3DisplayName(auth.organizationId);
    const view = await this.repository.transaction(async (trx) => {
      await this.ensureS3User(trx, auth.organizationId, displayName);
      // Locked, so that concurrent calls on a user without keys generate one pair, not one each.
      await this.repository.findS3User(trx, auth.organizationId, true);
      if ((await this.repository.listS3Keys(trx, auth.organizationId)).length === 0) {
        await this.insertKey(trx, auth.organizationId, nowIso(this.clock));
      }
      return this.s3UserView(trx, auth);
    });
    if (!view) throw new Error("object-storage user vanished");
    return { ok: true, value: view };
  }

  /** The key pairs; a write-capable key creates the user on first use, a read-only key creates nothing. */
  async s3Keys(auth: AuthContext): Promise<S3KeyView[]> {
    if (auth.readOnly) return this.keyViews(this.repository.db, auth);
    // Read before the transaction: on SQLite a query outside it would wait for its connection.
    const displayName = await this.s3DisplayName(auth.organizationId);
    return this.repository.transaction(async (trx) => {
      await this.ensureS3User(trx, auth.organizationId, displayName);
      return this.keyViews(trx, auth);
    });
  }

  /** One more key pair (the first call also creates the user and its first pair); returns all keys. */
  async createS3Key(auth: AuthContext): Promise<S3KeyView[]> {
    // Read before the transaction: on SQLite a query outside it would wait for its connection.
    const displayName = await this.s3DisplayName(auth.organizationId);
    return this.repository.transaction(async (trx) => {
      await this.ensureS3User(trx, auth.organizationId, displayName);
      await this.insertKey(trx, auth.organizationId, nowIso(this.clock));
      return this.keyViews(trx, auth);
    });
  }

  deleteS3Key(auth: AuthContext, accessKey: string) {
    return settle(async () => {
      const deleted = await this.repository.transaction((trx) =>
        this.repository.deleteS3Key(trx, auth.organizationId, accessKey),
      );
      if (!deleted) throw Fail.notFound("S3 key");
      return SUCCESS;
    });
  }
}
