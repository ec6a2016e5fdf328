import type { Clock } from "../clock.ts";
import type { Transact } from "../store/transactions.ts";
import type { BillingAccounts } from "./billing.ts";
import type { InfrastructureDriver } from "./driver/types.ts";
import type { Locations } from "./locations.ts";
import type { CloudRepository } from "./repository.ts";

/** What the cloud services are built from (constructed once in `createCloudServices`). */
export interface CloudDeps {
  repository: CloudRepository;
  transact: Transact;
  driver: InfrastructureDriver;
  locations: Locations;
  billing: BillingAccounts;
  clock: Clock;
}
