import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import type { IdentityService } from "../identity/service.ts";
import type { SecretBox } from "../secret-box.ts";
import type { DialectName } from "../store/database.ts";
import { transactor } from "../store/transactions.ts";
import { BillingAccounts } from "./billing.ts";
import type { CloudDeps } from "./context.ts";
import { DiskService } from "./disk-service.ts";
import type { InfrastructureDriver } from "./driver/types.ts";
import { FloatingIpService } from "./floating-ip-service.ts";
import { LoadBalancerService } from "./load-balancer-service.ts";
import { Locations } from "./locations.ts";
import { ObjectStorageService } from "./object-storage-service.ts";
import { CloudRepository } from "./repository.ts";
import { TokenService } from "./token-service.ts";
import { VmService } from "./vm-service.ts";

/** The cloud control plane, one service per resource. */
export interface CloudServices {
  locations: Locations;
  billing: BillingAccounts;
  tokens: TokenService;
  vms: VmService;
  disks: DiskService;
  floatingIps: FloatingIpService;
  loadBalancers: LoadBalancerService;
  objectStorage: ObjectStorageService;
}

export function createCloudServices(options: {
  db: CloudRepository["db"];
  dialect: DialectName;
  identity: IdentityService;
  driver: InfrastructureDriver;
  secrets: SecretBox;
  config: Config;
  clock: Clock;
}): CloudServices {
  const repository = new CloudRepository(options.db, options.dialect);
  const transact = transactor(options.db);
  const billing = new BillingAccounts(options.identity);
  const locations = new Locations(options.config, repository);
  const deps: CloudDeps = {
    repository,
    transact,
    driver: options.driver,
    locations,
    billing,
    clock: options.clock,
  };
  const floatingIps = new FloatingIpService(deps);
  const loadBalancers = new LoadBalancerService(deps, floatingIps);
  return {
    locations,
    billing,
    tokens: new TokenService(options.identity, billing),
    vms: new VmService(deps, floatingIps, loadBalancers),
    disks: new DiskService(deps),
    floatingIps,
    loadBalancers,
    objectStorage: new ObjectStorageService(
      repository,
      transact,
      options.identity,
      options.secrets,
      options.config,
      options.clock,
    ),
  };
}
