import { nowIso } from "../clock.ts";
import { isUuid } from "../ids.ts";
import type { Executor } from "../store/transactions.ts";
import type { CloudDeps } from "./context.ts";
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
import type { FloatingIpView } from "./schemas.ts";
import type { FloatingTargetType } from "./tables.ts";
import { floatingIpView } from "./views.ts";

const IP = "IP address";
const ASSIGNED = "IP address is already assigned to another resource";

export type AllocateFloatingIpOutcome = { outcome: "allocated"; ip: FloatingIpView } | Invalid | Conflict;
export type FloatingIpOutcome = { outcome: "found"; ip: FloatingIpView } | NotFound;
export type UpdateFloatingIpOutcome = { outcome: "updated"; ip: FloatingIpView } | NotFound | Invalid;
export type DeleteFloatingIpOutcome = Deleted | NotFound | Conflict;
export type AssignFloatingIpOutcome =
  | { outcome: "assigned"; ip: FloatingIpView }
  | NotFound
  | Conflict
  | Rejected;
export type UnassignFloatingIpOutcome = { outcome: "unassigned"; ip: FloatingIpView } | NotFound | Rejected;

/** Public addresses of a location: allocated from its pool, routed to a VM or load balancer. */
export class FloatingIpService {
  constructor(private readonly deps: CloudDeps) {}

  async allocate(
    { auth, scope }: Caller,
    input: { billingAccountId: number | undefined; name: string | undefined },
  ): Promise<AllocateFloatingIpOutcome> {
    const { repository, locations, clock } = this.deps;
    const billing = await this.deps.billing.resolve(auth, input.billingAccountId);
    if (billing.outcome !== "found") return billing;
    return retryOnConflict(() =>
      this.deps.transact(async (trx): Promise<AllocateFloatingIpOutcome> => {
        const taken = await locations.publicAddressFor(trx, scope);
        if ("refusal" in taken) return conflict(taken.refusal);
        const now = nowIso(clock);
        const row = await repository.insertFloatingIp(trx, {
          organization_id: scope.organizationId,
          location: scope.location,
          address: taken.address,
          name: input.name ?? "",
          user_id: auth.userId,
          billing_account_id: billing.billingAccountId,
          enabled: true,
          assigned_to: null,
          assigned_to_resource_type: null,
          assigned_to_private_ip: null,
          created_at: now,
          updated_at: now,
        });
        return { outcome: "allocated", ip: floatingIpView(row) };
      }),
    );
  }

  /** Invalid when the filter names a billing account that is not the organization's, as a write would be. */
  async list(
    { auth, scope }: Caller,
    filters: { vmUuid?: string | undefined; billingAccountId?: number | undefined },
  ): Promise<FloatingIpView[] | Invalid> {
    if (filters.billingAccountId !== undefined) {
      const billing = await this.deps.billing.resolve(auth, filters.billingAccountId);
      if (billing.outcome !== "found") return billing;
    }
    if (filters.vmUuid !== undefined && !isUuid(filters.vmUuid)) return [];
    const { repository } = this.deps;
    const rows = await repository.listFloatingIps(repository.db, scope, filters);
    return rows.map(floatingIpView);
  }

  async get({ scope }: Caller, address: string): Promise<FloatingIpOutcome> {
    const row = await this.deps.repository.findFloatingIp(this.deps.repository.db, scope, address);
    return row ? { outcome: "found", ip: floatingIpView(row) } : notFound(IP);
  }

  async update(
    { auth, scope }: Caller,
    address: string,
    changes: { name?: string | undefined; billingAccountId?: number | undefined },
  ): Promise<UpdateFloatingIpOutcome> {
    const { repository, clock } = this.deps;
    let billingAccountId: number | undefined;
    if (changes.billingAccountId !== undefined) {
      const billing = await this.deps.billing.resolve(auth, changes.billingAccountId);
      if (billing.outcome !== "found") return billing;
      billingAccountId = billing.billingAccountId;
    }
    return this.deps.transact(async (trx) => {
      const ip = await repository.findFloatingIp(trx, scope, address);
      if (!ip) return notFound(IP);
      const next = {
        name: changes.name ?? ip.name,
        billing_account_id: billingAccountId ?? ip.billing_account_id,
      };
      if (changesRow(ip, next)) {
        await repository.updateFloatingIp(trx, scope, ip.id, { ...next, updated_at: nowIso(clock) });
      }
      return { outcome: "updated", ip: await this.view(trx, scope, address) };
    });
  }

  delete({ scope }: Caller, address: string): Promise<DeleteFloatingIpOutcome> {
    const { repository } = this.deps;
    return this.deps.transact(async (trx) => {
      // Locked: a delete repeated while this one runs then finds the address gone (404), not assigned.
      const ip = await repository.findFloatingIp(trx, scope, address, true);
      if (!ip) return notFound(IP);
      if (ip.assigned_to !== null || !(await repository.deleteFloatingIp(trx, scope, ip.id))) {
        return conflict("IP address is assigned to a resource; unassign it first");
      }
      return DELETED;
    });
  }

  assign(
    { scope }: Caller,
    address: string,
    target: { uuid: string; type: FloatingTargetType },
  ): Promise<AssignFloatingIpOutcome> {
    const { repository, driver, clock } = this.deps;
    return unlessRejected(() =>
      this.deps.transact(async (trx): Promise<AssignFloatingIpOutcome> => {
        const ip = await repository.findFloatingIp(trx, scope, address);
        if (!ip) return notFound(IP);
        const privateIp = await this.targetAddress(trx, scope, target.type, target.uuid);
        if (typeof privateIp !== "string") return privateIp;
        if (ip.assigned_to === target.uuid && ip.assigned_to_resource_type === target.type) {
          return { outcome: "assigned", ip: floatingIpView(ip) };
        }
        if (ip.assigned_to !== null) return conflict(ASSIGNED);
        const assigned = await repository.assignFloatingIp(trx, scope, ip.id, {
          uuid: target.uuid,
          type: target.type,
          privateIp,
          now: nowIso(clock),
        });
        // Not free any more: taken by another target, or deleted meanwhile (then not found).
        if (!assigned) {
          return (await repository.findFloatingIp(trx, scope, address)) ? conflict(ASSIGNED) : notFound(IP);
        }
        await driver.routeFloatingIp(scope.location, address, privateIp);
        return { outcome: "assigned", ip: await this.view(trx, scope, address) };
      }),
    );
  }

  unassign({ scope }: Caller, address: string): Promise<UnassignFloatingIpOutcome> {
    const { repository, driver, clock } = this.deps;
    return unlessRejected(() =>
      this.deps.transact(async (trx): Promise<UnassignFloatingIpOutcome> => {
        const ip = await repository.findFloatingIp(trx, scope, address);
        if (!ip) return notFound(IP);
        if (ip.assigned_to !== null) {
          await repository.updateFloatingIp(trx, scope, ip.id, {
            assigned_to: null,
            assigned_to_resource_type: null,
            assigned_to_private_ip: null,
            updated_at: nowIso(clock),
          });
          await driver.routeFloatingIp(scope.location, address, null);
        }
        return { outcome: "unassigned", ip: await this.view(trx, scope, address) };
      }),
    );
  }

  /** Withdraws every floating IP routed to a VM or load balancer that is going away. */
  async releaseFrom(executor: Executor, scope: Scope, targetUuid: string, now: string): Promise<void> {
    const { repository, driver } = this.deps;
    for (const ip of await repository.floatingIpsAssignedTo(executor, scope, targetUuid)) {
      await driver.routeFloatingIp(scope.location, ip.address, null);
    }
    await repository.unassignFloatingIpsOf(executor, scope, targetUuid, now);
  }

  /** The private address a floating IP of this target type would route to (the target locked). */
  private async targetAddress(
    executor: Executor,
    scope: Scope,
    type: FloatingTargetType,
    uuid: string,
  ): Promise<string | NotFound> {
    const { repository } = this.deps;
    if (type === "virtual_machine") {
      return (
        (await repository.findVm(executor, scope, uuid, true))?.private_ipv4 ?? notFound("Virtual machine")
      );
    }
    if (type === "load_balancer") {
      return (
        (await repository.findLoadBalancer(executor, scope, uuid, true))?.private_address ??
        notFound("Load balancer")
      );
    }
    // Cumulo runs no managed services, so no service can be a target.
    return notFound("Service");
  }

  private async view(executor: Executor, scope: Scope, address: string): Promise<FloatingIpView> {
    const row = await this.deps.repository.findFloatingIp(executor, scope, address);
    if (!row) throw new Error(`floating IP ${address} vanished inside its transaction`);
    return floatingIpView(row);
  }
}
