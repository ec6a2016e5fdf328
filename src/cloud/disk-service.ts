import { randomUUID } from "node:crypto";
import { nowIso } from "../clock.ts";
import type { CloudDeps } from "./context.ts";
import { freeDataDevice } from "./devices.ts";
import type { Caller } from "./locations.ts";
import {
  type Conflict,
  conflict,
  DELETED,
  type Deleted,
  type Invalid,
  invalid,
  type NotFound,
  notFound,
  type Rejected,
  retryOnConflict,
  unlessRejected,
} from "./outcome.ts";
import { changesRow } from "./repository.ts";
import type { AttachView, DiskView } from "./schemas.ts";
import { diskView } from "./views.ts";

const DISK = "Disk";
const VM = "Virtual machine";

export type CreateDiskOutcome = { outcome: "created"; disk: DiskView } | Invalid | Rejected;
export type DiskOutcome = { outcome: "found"; disk: DiskView } | NotFound;
export type UpdateDiskOutcome = { outcome: "updated"; disk: DiskView } | NotFound | Invalid | Rejected;
export type DeleteDiskOutcome = Deleted | NotFound | Conflict | Rejected;
export type AttachDiskOutcome =
  | { outcome: "attached"; attachment: AttachView }
  | NotFound
  | Conflict
  | Rejected;
export type DetachDiskOutcome = { outcome: "detached" } | NotFound | Conflict | Rejected;

/** Block-storage disks of a location, and attaching them to VMs. */
export class DiskService {
  constructor(private readonly deps: CloudDeps) {}

  async create(
    { auth, scope }: Caller,
    input: { sizeGb: number; billingAccountId: number | undefined; displayName: string | undefined },
  ): Promise<CreateDiskOutcome> {
    const { repository, driver, clock } = this.deps;
    const billing = await this.deps.billing.resolve(auth, input.billingAccountId);
    if (billing.outcome !== "found") return billing;
    const uuid = randomUUID();
    return unlessRejected(() =>
      this.deps.transact(async (trx) => {
        const now = nowIso(clock);
        const row = {
          uuid,
          organization_id: scope.organizationId,
          location: scope.location,
          user_id: auth.userId,
          billing_account_id: billing.billingAccountId,
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
        };
        await repository.insertDisk(trx, row);
        await driver.createDisk(scope.location, uuid, input.sizeGb);
        return { outcome: "created", disk: diskView(row) };
      }),
    );
  }

  async list({ scope }: Caller): Promise<DiskView[]> {
    const { repository } = this.deps;
    return (await repository.listDisks(repository.db, scope)).map(diskView);
  }

  async get({ scope }: Caller, uuid: string): Promise<DiskOutcome> {
    const row = await this.deps.repository.findDisk(this.deps.repository.db, scope, uuid);
    return row ? { outcome: "found", disk: diskView(row) } : notFound(DISK);
  }

  async update(
    { auth, scope }: Caller,
    uuid: string,
    changes: {
      displayName?: string | undefined;
      billingAccountId?: number | undefined;
      sizeGb?: number | undefined;
    },
  ): Promise<UpdateDiskOutcome> {
    const { repository, driver, clock } = this.deps;
    let billingAccountId: number | undefined;
    if (changes.billingAccountId !== undefined) {
      const billing = await this.deps.billing.resolve(auth, changes.billingAccountId);
      if (billing.outcome !== "found") return billing;
      billingAccountId = billing.billingAccountId;
    }
    return unlessRejected(() =>
      this.deps.transact(async (trx): Promise<UpdateDiskOutcome> => {
        // Locked: two changes at once each keep the other's fields (PostgreSQL).
        const disk = await repository.findDisk(trx, scope, uuid, true);
        if (!disk) return notFound(DISK);
        if (changes.sizeGb !== undefined && changes.sizeGb < disk.size_gb) {
          return invalid("size_gb", "The size_gb field cannot be smaller than the disk's current size.");
        }
        if (changes.sizeGb !== undefined && changes.sizeGb > disk.size_gb) {
          await driver.resizeDisk(scope.location, uuid, changes.sizeGb);
        }
        const next = {
          display_name: changes.displayName ?? disk.display_name,
          billing_account_id: billingAccountId ?? disk.billing_account_id,
          size_gb: changes.sizeGb ?? disk.size_gb,
        };
        if (changesRow(disk, next)) {
          await repository.updateDisk(trx, scope, uuid, { ...next, updated_at: nowIso(clock) });
        }
        const updated = await repository.findDisk(trx, scope, uuid);
        if (!updated) throw new Error(`disk ${uuid} vanished inside its transaction`);
        return { outcome: "updated", disk: diskView(updated) };
      }),
    );
  }

  delete({ scope }: Caller, uuid: string): Promise<DeleteDiskOutcome> {
    const { repository, driver } = this.deps;
    return unlessRejected(() =>
      this.deps.transact(async (trx) => {
        // Locked: a delete repeated while this one runs then finds the disk gone (404), not attached.
        const disk = await repository.findDisk(trx, scope, uuid, true);
        if (!disk) return notFound(DISK);
        // The VM is named: a disk's own fields do not show where it is attached.
        if (disk.vm_uuid !== null)
          return conflict(`Disk is attached to virtual machine ${disk.vm_uuid}; detach it first`);
        if (!(await repository.deleteDisk(trx, scope, uuid))) {
          return conflict("Disk is attached to a virtual machine; detach it first");
        }
        await driver.deleteDisk(scope.location, uuid);
        return DELETED;
      }),
    );
  }

  /** Attaches under the VM's first free data device name (the store's unique index settles races). */
  attach({ scope }: Caller, vmUuid: string, diskUuid: string): Promise<AttachDiskOutcome> {
    const { repository, driver, clock } = this.deps;
    const attached = "Disk is already attached to a virtual machine";
    return unlessRejected(() =>
      retryOnConflict(() =>
        this.deps.transact(async (trx): Promise<AttachDiskOutcome> => {
          // The VM locked first: its deletion waits, or this finds it gone (never a dangling reference).
          if (!(await repository.findVm(trx, scope, vmUuid, true))) return notFound(VM);
          // Then the disk: one deleted meanwhile is not found, not "attached".
          const disk = await repository.findDisk(trx, scope, diskUuid, true);
          if (!disk) return notFound(DISK);
          if (disk.vm_uuid !== null)
            return conflict(`Disk is already attached to virtual machine ${disk.vm_uuid}`);
          const device = freeDataDevice(
            (await repository.disksOfVms(trx, [vmUuid])).map((row) => row.device_name),
          );
          if (!device) return conflict("The virtual machine has no free device name left");
          const now = nowIso(clock);
          if (
            !(await repository.attachDisk(trx, scope, diskUuid, {
              vm_uuid: vmUuid,
              device_name: device,
              attached_at: now,
            }))
          ) {
            return conflict(attached);
          }
          await driver.attachDisk(scope.location, vmUuid, diskUuid, device);
          return {
            outcome: "attached",
            attachment: {
              uuid: diskUuid,
              size: disk.size_gb,
              name: device,
              primary: false,
              created_at: now,
              user_id: disk.user_id,
            },
          };
        }),
      ),
    );
  }

  detach({ scope }: Caller, vmUuid: string, diskUuid: string): Promise<DetachDiskOutcome> {
    const { repository, driver, clock } = this.deps;
    return unlessRejected(() =>
      this.deps.transact(async (trx): Promise<DetachDiskOutcome> => {
        if (!(await repository.findVm(trx, scope, vmUuid, true))) return notFound(VM);
        const disk = await repository.findDisk(trx, scope, diskUuid);
        if (!disk) return notFound(DISK);
        if (!(await repository.detachDisk(trx, scope, diskUuid, vmUuid, nowIso(clock)))) {
          return conflict("Disk is not attached to this virtual machine");
        }
        await driver.detachDisk(scope.location, vmUuid, diskUuid, disk.device_name ?? "");
        return { outcome: "detached" };
      }),
    );
  }
}
