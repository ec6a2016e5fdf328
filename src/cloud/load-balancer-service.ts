import { randomUUID } from "node:crypto";
import { nowIso } from "../clock.ts";
import type { Executor } from "../store/transactions.ts";
import type { CloudDeps } from "./context.ts";
import type { LoadBalancerSpec } from "./driver/types.ts";
import type { FloatingIpService } from "./floating-ip-service.ts";
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
import { changesRow, type Scope } from "./repository.ts";
import {
  type LoadBalancerView,
  MAX_LOAD_BALANCER_RULES,
  MAX_LOAD_BALANCER_TARGETS,
  type RuleBody,
  type RuleView,
  type TargetBody,
  type TargetView,
} from "./schemas.ts";
import { loadBalancerViews } from "./views.ts";

const LB = "Load balancer";

export type CreateLoadBalancerOutcome =
  | { outcome: "created"; loadBalancer: LoadBalancerView }
  | Invalid
  | NotFound
  | Conflict
  | Rejected;
export type LoadBalancerOutcome = { outcome: "found"; loadBalancer: LoadBalancerView } | NotFound;
export type UpdateLoadBalancerOutcome = { outcome: "updated"; loadBalancer: LoadBalancerView } | NotFound;
export type SetLoadBalancerBillingOutcome =
  | { outcome: "updated"; loadBalancer: LoadBalancerView }
  | NotFound
  | Invalid;
export type DeleteLoadBalancerOutcome = Deleted | NotFound | Rejected;
export type AddTargetOutcome = { outcome: "added"; target: TargetView } | NotFound | Conflict | Rejected;
export type AddRuleOutcome = { outcome: "added"; rule: RuleView } | NotFound | Invalid | Conflict | Rejected;
export type RemoveOutcome = Deleted | NotFound | Rejected;

const protocolOf = (rule: RuleBody) => (rule.protocol ?? "TCP").toUpperCase();

/** Load balancers: a private address, forwarding rules and VM targets, applied whole to the driver. */
export class LoadBalancerService {
  constructor(
    private readonly deps: CloudDeps,
    private readonly floatingIps: FloatingIpService,
  ) {}

  async create(
    { auth, scope }: Caller,
    input: {
      displayName: string | undefined;
      billingAccountId: number | undefined;
      rules: RuleBody[];
      rulesField: string;
      targets: TargetBody[];
    },
  ): Promise<CreateLoadBalancerOutcome> {
    const { repository, locations, clock } = this.deps;
    const ports = new Set<number>();
    for (const rule of input.rules) {
      if (ports.has(rule.source_port)) {
        return invalid(input.rulesField, `Source port ${rule.source_port} is used by more than one rule.`);
      }
      ports.add(rule.source_port);
    }
    const billing = await this.deps.billing.resolve(auth, input.billingAccountId);
    if (billing.outcome !== "found") return billing;
    const uuid = randomUUID();
    return unlessRejected(() =>
      retryOnConflict(() =>
        this.deps.transact(async (trx): Promise<CreateLoadBalancerOutcome> => {
          const targets = await this.resolveTargets(trx, scope, input.targets);
          if (!Array.isArray(targets)) return targets;
          const privateAddress = await locations.freePrivateAddress(trx, scope.location);
          if (!privateAddress) return conflict(`No private address is left in location ${scope.location}`);
          const now = nowIso(clock);
          await repository.claimPrivateAddress(trx, {
            location: scope.location,
            address: privateAddress,
            resource_type: "load_balancer",
            resource_uuid: uuid,
          });
          await repository.insertLoadBalancer(trx, {
            uuid,
            organization_id: scope.organizationId,
            location: scope.location,
            user_id: auth.userId,
            billing_account_id: billing.billingAccountId,
            display_name: input.displayName ?? "",
            private_address: privateAddress,
            created_at: now,
            updated_at: now,
          });
          await repository.insertRules(
            trx,
            input.rules.map((rule) => ({
              uuid: randomUUID(),
              load_balancer_uuid: uuid,
              protocol: protocolOf(rule),
              source_port: rule.source_port,
              target_port: rule.target_port,
              created_at: now,
            })),
          );
          await repository.insertTargets(
            trx,
            targets.map((target) => ({
              load_balancer_uuid: uuid,
              target_uuid: target.uuid,
              target_type: target.type,
              target_ip_address: target.ip,
              created_at: now,
            })),
          );
          const loadBalancer = await this.apply(trx, scope, uuid);
          return { outcome: "created", loadBalancer };
        }),
      ),
    );
  }

  async list({ scope }: Caller): Promise<LoadBalancerView[]> {
    const { repository } = this.deps;
    return loadBalancerViews(
      repository,
      repository.db,
      await repository.listLoadBalancers(repository.db, scope),
    );
  }

  async get({ scope }: Caller, uuid: string): Promise<LoadBalancerOutcome> {
    const loadBalancer = await this.find(this.deps.repository.db, scope, uuid);
    return loadBalancer ? { outcome: "found", loadBalancer } : notFound(LB);
  }

  update(
    { scope }: Caller,
    uuid: string,
    changes: { displayName?: string | undefined },
  ): Promise<UpdateLoadBalancerOutcome> {
    const { repository, clock } = this.deps;
    return this.deps.transact(async (trx) => {
      const row = await repository.findLoadBalancer(trx, scope, uuid);
      if (!row) return notFound(LB);
      const next = { display_name: changes.displayName ?? row.display_name };
      if (changesRow(row, next)) {
        await repository.updateLoadBalancer(trx, scope, uuid, { ...next, updated_at: nowIso(clock) });
      }
      return { outcome: "updated", loadBalancer: await this.require(trx, scope, uuid) };
    });
  }

  async setBilling(
    { auth, scope }: Caller,
    uuid: string,
    given: number,
  ): Promise<SetLoadBalancerBillingOutcome> {
    const { repository, clock } = this.deps;
    const billing = await this.deps.billing.resolve(auth, given, "set_id");
    if (billing.outcome !== "found") return billing;
    return this.deps.transact(async (trx) => {
      if (!(await repository.findLoadBalancer(trx, scope, uuid))) return notFound(LB);
      await repository.updateLoadBalancer(trx, scope, uuid, {
        billing_account_id: billing.billingAccountId,
        updated_at: nowIso(clock),
      });
      return { outcome: "updated", loadBalancer: await this.require(trx, scope, uuid) };
    });
  }

  delete({ scope }: Caller, uuid: string): Promise<DeleteLoadBalancerOutcome> {
    const { repository, driver, clock } = this.deps;
    return unlessRejected(() =>
      this.deps.transact(async (trx) => {
        if (!(await repository.findLoadBalancer(trx, scope, uuid, true))) return notFound(LB);
        await this.floatingIps.releaseFrom(trx, scope, uuid, nowIso(clock));
        await repository.releasePrivateAddress(trx, scope.location, uuid);
        await repository.deleteLoadBalancer(trx, scope, uuid);
        await driver.deleteLoadBalancer(scope.location, uuid);
        return DELETED;
      }),
    );
  }

  /** Adds a VM as a target; adding one that is already a target answers the existing one. */
  addTarget({ scope }: Caller, uuid: string, target: TargetBody): Promise<AddTargetOutcome> {
    const { repository, clock } = this.deps;
    return unlessRejected(() =>
      retryOnConflict(() =>
        this.deps.transact(async (trx): Promise<AddTargetOutcome> => {
          if (!(await repository.findLoadBalancer(trx, scope, uuid))) return notFound(LB);
          // Locks in the documented order: the VM, then the load balancer.
          const vm = await repository.findVm(trx, scope, target.target_uuid, true);
          if (!vm) return notFound("Virtual machine");
          const current = await this.find(trx, scope, uuid, true);
          if (!current) return notFound(LB);
          const existing = current.targets.find((t) => t.target_uuid === vm.uuid);
          if (existing) return { outcome: "added", target: existing };
          // The bound of a creation holds for additions too (QA of 4 December: rules grew past it).
          if (current.targets.length >= MAX_LOAD_BALANCER_TARGETS) {
            return conflict(
              `The load balancer already has ${MAX_LOAD_BALANCER_TARGETS} targets, the most it may have`,
            );
          }
          const row = {
            load_balancer_uuid: uuid,
            target_uuid: vm.uuid,
            target_type: target.target_type,
            target_ip_address: vm.private_ipv4,
            created_at: nowIso(clock),
          };
          await repository.insertTargets(trx, [row]);
          await this.touch(trx, scope, uuid);
          const { load_balancer_uuid: _, ...added } = row;
          return { outcome: "added", target: added };
        }),
      ),
    );
  }

  removeTarget({ scope }: Caller, uuid: string, targetUuid: string): Promise<RemoveOutcome> {
    const { repository } = this.deps;
    return unlessRejected(() =>
      this.deps.transact(async (trx) => {
        if (!(await repository.findLoadBalancer(trx, scope, uuid, true))) return notFound(LB);
        if (!(await repository.deleteTarget(trx, uuid, targetUuid))) return notFound("Target");
        await this.touch(trx, scope, uuid);
        return DELETED;
      }),
    );
  }

  /**
   * Takes a VM that is being deleted (and is locked) out of a load balancer, as removing the target
   * does. The load balancer is locked before its target row, as its own deletion locks them.
   */
  async dropTarget(executor: Executor, scope: Scope, uuid: string, vmUuid: string): Promise<void> {
    if (!(await this.deps.repository.findLoadBalancer(executor, scope, uuid, true))) return;
    await this.deps.repository.deleteTarget(executor, uuid, vmUuid);
    await this.touch(executor, scope, uuid);
  }

  addRule({ scope }: Caller, uuid: string, rule: RuleBody): Promise<AddRuleOutcome> {
    const { repository, clock } = this.deps;
    return unlessRejected(() =>
      retryOnConflict(() =>
        this.deps.transact(async (trx): Promise<AddRuleOutcome> => {
          const current = await this.find(trx, scope, uuid, true);
          if (!current) return notFound(LB);
          if (current.forwarding_rules.some((existing) => existing.source_port === rule.source_port)) {
            return invalid("source_port", `Source port ${rule.source_port} is already used by another rule.`);
          }
          if (current.forwarding_rules.length >= MAX_LOAD_BALANCER_RULES) {
            return conflict(
              `The load balancer already has ${MAX_LOAD_BALANCER_RULES} forwarding rules, the most it may have`,
            );
          }
          const row = {
            uuid: randomUUID(),
            load_balancer_uuid: uuid,
            protocol: protocolOf(rule),
            source_port: rule.source_port,
            target_port: rule.target_port,
            created_at: nowIso(clock),
          };
          await repository.insertRules(trx, [row]);
          await this.touch(trx, scope, uuid);
          const { load_balancer_uuid: _, ...added } = row;
          return { outcome: "added", rule: added };
        }),
      ),
    );
  }

  removeRule({ scope }: Caller, uuid: string, ruleUuid: string): Promise<RemoveOutcome> {
    const { repository } = this.deps;
    return unlessRejected(() =>
      this.deps.transact(async (trx) => {
        if (!(await repository.findLoadBalancer(trx, scope, uuid, true))) return notFound(LB);
        if (!(await repository.deleteRule(trx, uuid, ruleUuid))) return notFound("Forwarding rule");
        await this.touch(trx, scope, uuid);
        return DELETED;
      }),
    );
  }

  /** Hands the load balancer's whole configuration, as stored now, to the driver; returns its view. */
  async apply(executor: Executor, scope: Scope, uuid: string): Promise<LoadBalancerView> {
    const view = await this.require(executor, scope, uuid);
    const spec: LoadBalancerSpec = {
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
    await this.deps.driver.applyLoadBalancer(spec);
    return view;
  }

  private async touch(executor: Executor, scope: Scope, uuid: string) {
    await this.deps.repository.updateLoadBalancer(executor, scope, uuid, {
      updated_at: nowIso(this.deps.clock),
    });
    await this.apply(executor, scope, uuid);
  }

  private async find(executor: Executor, scope: Scope, uuid: string, lock = false) {
    const row = await this.deps.repository.findLoadBalancer(executor, scope, uuid, lock);
    if (!row) return undefined;
    const [view] = await loadBalancerViews(this.deps.repository, executor, [row]);
    return view;
  }

  private async require(executor: Executor, scope: Scope, uuid: string): Promise<LoadBalancerView> {
    const view = await this.find(executor, scope, uuid);
    if (!view) throw new Error(`load balancer ${uuid} vanished inside its transaction`);
    return view;
  }

  /** The VMs named as targets, each once, with their private addresses; an unknown one is not found. */
  private async resolveTargets(executor: Executor, scope: Scope, targets: TargetBody[]) {
    const { repository } = this.deps;
    // Lock in one order, so that two calls naming the same VMs cannot wait for each other.
    for (const uuid of [...new Set(targets.map((target) => target.target_uuid))].sort()) {
      if (!(await repository.findVm(executor, scope, uuid, true))) return notFound("Virtual machine");
    }
    const resolved = new Map<string, { uuid: string; type: string; ip: string }>();
    for (const target of targets) {
      const vm = await repository.findVm(executor, scope, target.target_uuid);
      if (!vm) return notFound("Virtual machine");
      resolved.set(vm.uuid, { uuid: vm.uuid, type: target.target_type, ip: vm.private_ipv4 });
    }
    return [...resolved.values()];
  }
}
