import { randomUUID } from "node:crypto";
import { nowIso } from "../clock.ts";
import { readBool } from "../store/codec.ts";
import type { Executor } from "../store/transactions.ts";
import type { CloudDeps } from "./context.ts";
import { SYSTEM_DEVICE } from "./devices.ts";
import type { FloatingIpService } from "./floating-ip-service.ts";
import type { LoadBalancerService } from "./load-balancer-service.ts";
import type { Caller } from "./locations.ts";
import {
  type Conflict,
  conflict,
  DELETED,
  type Deleted,
  type Invalid,
  type NotFound,
  notFound,
  type Rejected,
  retryOnConflict,
  unlessRejected,
} from "./outcome.ts";
import { changesRow, type Scope } from "./repository.ts";
import type { VmView } from "./schemas.ts";
import { hashPassword } from "./secrets.ts";
import { vmViews } from "./views.ts";

const VM = "Virtual machine";

export interface CreateVmInput {
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
}

export type CreateVmOutcome = { outcome: "created"; vm: VmView } | Invalid | Conflict | Rejected;
export type VmOutcome = { outcome: "found"; vm: VmView } | NotFound;
export type UpdateVmOutcome = { outcome: "updated"; vm: VmView } | NotFound | Rejected | Invalid;
export type DeleteVmOutcome = Deleted | NotFound | Rejected;

/** A host name from a VM name: lower case letters, digits and dashes, at most 63 characters. */
function hostnameOf(name: string): string {
  const cleaned = name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 63)
    .replace(/-+$/, "");
  return cleaned || "vm";
}

/** Virtual machines of a location: their rows, system disk, addresses and the driver calls. */
export class VmService {
  constructor(
    private readonly deps: CloudDeps,
    private readonly floatingIps: FloatingIpService,
    private readonly loadBalancers: LoadBalancerService,
  ) {}

  /**
   * Identifiers are chosen once, before the retry loop, and the driver is called only after every
   * row is written: a retry after a unique conflict (a private or public address taken concurrently)
   * writes the same VM again and never asks the infrastructure for a second one.
   */
  async create({ auth, scope }: Caller, input: CreateVmInput): Promise<CreateVmOutcome> {
    const { repository, locations, driver, clock } = this.deps;
    const billing = await this.deps.billing.resolve(auth, input.billingAccountId);
    if (billing.outcome !== "found") return billing;
    const passwordHash = input.password ? await hashPassword(input.password) : "";
    const uuid = randomUUID();
    const diskUuid = randomUUID();
    const hostname = hostnameOf(input.name);
    return unlessRejected(() =>
      retryOnConflict(() =>
        this.deps.transact(async (trx): Promise<CreateVmOutcome> => {
          const privateIpv4 = await locations.freePrivateAddress(trx, scope.location);
          if (!privateIpv4) return conflict(`No private address is left in location ${scope.location}`);
          const publicAddress = input.reservePublicIp
            ? await locations.publicAddressFor(trx, scope)
            : undefined;
          if (publicAddress && "refusal" in publicAddress) return conflict(publicAddress.refusal);
          const publicIpv4 = publicAddress?.address;
          const now = nowIso(clock);
          const owner = {
            organization_id: scope.organizationId,
            location: scope.location,
            user_id: auth.userId,
            billing_account_id: billing.billingAccountId,
          };
          await repository.claimPrivateAddress(trx, {
            location: scope.location,
            address: privateIpv4,
            resource_type: "virtual_machine",
            resource_uuid: uuid,
          });
          // MAC and power state are facts the driver reports: filled in once it has made the VM.
          await repository.insertVm(trx, {
            ...owner,
            uuid,
            name: input.name,
            description: input.description,
            status: "provisioning",
            vcpu: input.vcpu,
            memory: input.ram,
            hostname,
            mac: "",
            os_name: input.osName,
            os_version: input.osVersion,
            username: input.username,
            password_hash: passwordHash,
            public_key: input.publicKeys.join("\n"),
            private_ipv4: privateIpv4,
            created_at: now,
            updated_at: now,
          });
          await repository.insertDisk(trx, {
            ...owner,
            uuid: diskUuid,
            display_name: `${input.name} system disk`,
            size_gb: input.disks,
            status: "Active",
            source_image_type: "OS_BASE",
            is_system: true,
            vm_uuid: uuid,
            device_name: SYSTEM_DEVICE,
            attached_at: now,
            created_at: now,
            updated_at: now,
          });
          if (publicIpv4) {
            await repository.insertFloatingIp(trx, {
              ...owner,
              address: publicIpv4,
              name: input.name,
              enabled: true,
              assigned_to: uuid,
              assigned_to_resource_type: "virtual_machine",
              assigned_to_private_ip: privateIpv4,
              created_at: now,
              updated_at: now,
            });
          }
          const created = await driver.createVm({
            location: scope.location,
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
            systemDisk: { uuid: diskUuid, sizeGb: input.disks, device: SYSTEM_DEVICE },
          });
          await repository.updateVm(trx, scope, uuid, { mac: created.mac, status: created.status });
          if (publicIpv4) await driver.routeFloatingIp(scope.location, publicIpv4, privateIpv4);
          return { outcome: "created", vm: await this.require(trx, scope, uuid) };
        }),
      ),
    );
  }

  async get({ scope }: Caller, uuid: string): Promise<VmOutcome> {
    const vm = await this.find(this.deps.repository.db, scope, uuid);
    return vm ? { outcome: "found", vm } : notFound(VM);
  }

  async list({ scope }: Caller): Promise<VmView[]> {
    const { repository } = this.deps;
    return vmViews(repository, repository.db, scope, await repository.listVms(repository.db, scope));
  }

  async update(
    { auth, scope }: Caller,
    uuid: string,
    changes: {
      name?: string | undefined;
      vcpu?: number | undefined;
      ram?: number | undefined;
      description?: string | undefined;
      billingAccountId?: number | undefined;
    },
  ): Promise<UpdateVmOutcome> {
    const { repository, driver, clock } = this.deps;
    let billingAccountId: number | undefined;
    if (changes.billingAccountId !== undefined) {
      const billing = await this.deps.billing.resolve(auth, changes.billingAccountId);
      if (billing.outcome !== "found") return billing;
      billingAccountId = billing.billingAccountId;
    }
    return unlessRejected(() =>
      this.deps.transact(async (trx) => {
        // Locked: a deletion or another change of the VM waits for this one (PostgreSQL).
        const vm = await repository.findVm(trx, scope, uuid, true);
        if (!vm) return notFound(VM);
        const vcpu = changes.vcpu ?? vm.vcpu;
        const memory = changes.ram ?? vm.memory;
        if (vcpu !== vm.vcpu || memory !== vm.memory) {
          await driver.resizeVm(scope.location, uuid, { vcpu, memoryMb: memory });
        }
        const next = {
          name: changes.name ?? vm.name,
          hostname: changes.name !== undefined ? hostnameOf(changes.name) : vm.hostname,
          description: changes.description ?? vm.description,
          billing_account_id: billingAccountId ?? vm.billing_account_id,
          vcpu,
          memory,
        };
        if (changesRow(vm, next)) {
          await repository.updateVm(trx, scope, uuid, { ...next, updated_at: nowIso(clock) });
        }
        return { outcome: "updated", vm: await this.require(trx, scope, uuid) };
      }),
    );
  }

  setPower({ scope }: Caller, uuid: string, state: "running" | "stopped"): Promise<UpdateVmOutcome> {
    const { repository, driver, clock } = this.deps;
    return unlessRejected(() =>
      this.deps.transact(async (trx) => {
        const vm = await repository.findVm(trx, scope, uuid, true);
        if (!vm) return notFound(VM);
        if (vm.status !== state) {
          const status = await driver.setPower(scope.location, uuid, state);
          await repository.updateVm(trx, scope, uuid, { status, updated_at: nowIso(clock) });
        }
        return { outcome: "updated", vm: await this.require(trx, scope, uuid) };
      }),
    );
  }

  /** Deletes a VM: data disks are detached (kept), its addresses released, and it leaves every load balancer. */
  delete({ scope }: Caller, uuid: string): Promise<DeleteVmOutcome> {
    const { repository, driver, clock } = this.deps;
    return unlessRejected(() =>
      this.deps.transact(async (trx) => {
        if (!(await repository.findVm(trx, scope, uuid, true))) return notFound(VM);
        const now = nowIso(clock);
        for (const disk of await repository.disksOfVms(trx, [uuid])) {
          if (readBool(disk.is_system)) continue;
          await driver.detachDisk(scope.location, uuid, disk.uuid, disk.device_name ?? "");
          await repository.detachDisk(trx, scope, disk.uuid, uuid, now);
        }
        await this.floatingIps.releaseFrom(trx, scope, uuid, now);
        for (const lbUuid of await repository.loadBalancersTargeting(trx, scope, uuid)) {
          await this.loadBalancers.dropTarget(trx, scope, lbUuid, uuid);
        }
        await repository.deleteSystemDisk(trx, uuid);
        await repository.releasePrivateAddress(trx, scope.location, uuid);
        await repository.deleteVm(trx, scope, uuid);
        await driver.deleteVm(scope.location, uuid);
        return DELETED;
      }),
    );
  }

  private async find(executor: Executor, scope: Scope, uuid: string): Promise<VmView | undefined> {
    const row = await this.deps.repository.findVm(executor, scope, uuid);
    if (!row) return undefined;
    const [view] = await vmViews(this.deps.repository, executor, scope, [row]);
    return view;
  }

  private async require(executor: Executor, scope: Scope, uuid: string): Promise<VmView> {
    const view = await this.find(executor, scope, uuid);
    if (!view) throw new Error(`virtual machine ${uuid} vanished inside its transaction`);
    return view;
  }
}
