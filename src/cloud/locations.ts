import type { Config } from "../config.ts";
import type { AuthContext } from "../identity/service.ts";
import type { Executor } from "../store/transactions.ts";
import { lowestFree, type Pool, parsePool } from "./addresses.ts";
import type { CloudRepository, Scope } from "./repository.ts";
import type { LocationView } from "./schemas.ts";

/** Who calls a location-bound operation, and the tenant and location every query of it is confined to. */
export interface Caller {
  auth: AuthContext;
  scope: Scope;
}

interface KnownLocation {
  view: LocationView;
  publicPool: Pool;
  privatePool: Pool;
}

/** The configured locations (CUMULO_LOCATIONS), their address pools, and the scope of a request. */
export class Locations {
  private readonly bySlug: Map<string, KnownLocation>;
  /** The first configured location: the one of routes without a location segment. */
  readonly defaultSlug: string;
  /** CUMULO_PUBLIC_IPS_PER_ORGANIZATION: how many public addresses one organization may hold per location. */
  private readonly publicAddressQuota: number | undefined;

  constructor(
    config: Config,
    private readonly repository: CloudRepository,
  ) {
    this.bySlug = new Map(
      config.locations.map((location, order) => [
        location.slug,
        {
          view: {
            slug: location.slug,
            display_name: location.displayName,
            description: location.description,
            country_code: location.countryCode,
            is_default: order === 0,
            is_preferred: order === 0,
            order_nr: order,
          },
          publicPool: parsePool(location.publicPool),
          privatePool: parsePool(location.privatePool),
        },
      ]),
    );
    this.defaultSlug = config.locations[0]?.slug ?? "local-1";
    this.publicAddressQuota = config.publicIpsPerOrganization;
  }

  has(slug: string): boolean {
    return this.bySlug.has(slug);
  }

  list(): LocationView[] {
    return [...this.bySlug.values()].map((location) => location.view);
  }

  /** The caller of an operation at `slug` (the default location when the route has no segment). */
  caller(auth: AuthContext, slug: string | undefined): Caller {
    return { auth, scope: { organizationId: auth.organizationId, location: slug ?? this.defaultSlug } };
  }

  /** The lowest private address of the location no VM or load balancer holds, if any is left. */
  async freePrivateAddress(executor: Executor, location: string): Promise<string | undefined> {
    const used = await this.repository.privateAddressesInUse(executor, location);
    return lowestFree(this.known(location).privatePool, used);
  }

  /**
   * The lowest public address of the location no floating IP holds, for the organization to take
   * in this transaction; or why it may not have one: the pool is exhausted, or the organization
   * holds its quota of the location's addresses already (the pool is shared by every tenant).
   */
  async publicAddressFor(
    executor: Executor,
    scope: Scope,
  ): Promise<{ address: string } | { refusal: string }> {
    if (this.publicAddressQuota !== undefined) {
      await this.repository.lockOrganizationAllocations(executor, scope.organizationId);
      const held = await this.repository.countFloatingIps(executor, scope);
      if (held >= this.publicAddressQuota) {
        return {
          refusal: `The organization holds its quota of ${this.publicAddressQuota} public IP addresses in location ${scope.location}`,
        };
      }
    }
    const used = await this.repository.floatingAddressesInUse(executor, scope.location);
    const address = lowestFree(this.known(scope.location).publicPool, used);
    return address ? { address } : { refusal: `No public IP address is left in location ${scope.location}` };
  }

  private known(slug: string): KnownLocation {
    const location = this.bySlug.get(slug);
    if (!location) throw new Error(`unknown location ${slug}`);
    return location;
  }
}
