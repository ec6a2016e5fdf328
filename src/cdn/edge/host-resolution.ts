import type { IncomingMessage } from "node:http";
import type { Clock } from "../../clock.ts";
import type { Config } from "../../config.ts";
import { isStoreUnavailable } from "../../store/unavailable.ts";
import { servedUnderHostname } from "../hostname-verification.ts";
import { mayServe } from "../reserved-hosts.ts";
import type { CdnService } from "../service.ts";
import type { DistributionRow } from "../tables.ts";
import type { Resolved } from "./cache-policy.ts";
import { normalizedPathAndQuery } from "./path-normalization.ts";

/** How long an edge trusts what it read about a host name (changes also arrive on the bus). */
const DISTRIBUTION_TTL_MS = 500;
const MAX_REMEMBERED_HOSTS = 10_000;

/** A host name as distributions are named: lower case, without port or trailing dot. */
function hostNameOf(authority: string | undefined): string | undefined {
  const host = authority?.trim().toLowerCase();
  if (!host) return undefined;
  if (host.startsWith("[")) return undefined; // an IPv6 literal names no distribution
  return host.replace(/:\d+$/, "").replace(/\.$/, "");
}

/**
 * Picks the distribution a request is for: host-style by `Host`, else path-style by the first path
 * segment. A name pending verification is served path-style only (by `Host` it is an unknown host).
 * What the store says about a name is remembered briefly; a name reserved for the platform
 * resolves only to the library it was made for, so the edge's own names always mean path-style.
 */
export class HostResolver {
  readonly #hosts = new Map<string, { distribution: DistributionRow | undefined; expires: number }>();
  readonly #lookups = new Map<string, Promise<DistributionRow | undefined>>();

  constructor(
    private readonly cdn: CdnService,
    private readonly config: Config,
    private readonly clock: Clock,
  ) {}

  /** Drops what is remembered of a name (it was created, changed or deleted). */
  forget(hostname: string): void {
    this.#hosts.delete(hostname);
  }

  clear(): void {
    this.#hosts.clear();
  }

  /**
   * The distribution and path a request is for. While what the store said about the name is
   * remembered the answer is given at once, without a promise: the cache-hit path never waits.
   */
  resolve(request: IncomingMessage): Resolved | undefined | Promise<Resolved | undefined> {
    const url = request.url ?? "/";
    const queryAt = url.indexOf("?");
    let path = queryAt === -1 ? url : url.slice(0, queryAt);
    const query = queryAt === -1 ? "" : url.slice(queryAt);
    let authority = request.headers.host;
    if (/^https?:\/\//i.test(path)) {
      // An absolute-form request target names the host itself, whatever `Host` says (RFC 9112,
      // 3.2.2); one no URL can hold names nothing here.
      if (!URL.canParse(path)) return undefined;
      const target = new URL(path);
      path = target.pathname;
      authority = target.host;
    }
    if (!path.startsWith("/")) path = `/${path}`;

    const host = hostNameOf(authority);
    if (host) {
      const distribution = this.#distribution(host);
      if (distribution instanceof Promise) {
        return distribution.then((found) =>
          found && servedUnderHostname(found, this.config)
            ? { distribution: found, pathAndQuery: normalizedPathAndQuery(path + query) }
            : this.#byPathPrefix(path, query),
        );
      }
      if (distribution && servedUnderHostname(distribution, this.config)) {
        return { distribution, pathAndQuery: normalizedPathAndQuery(path + query) };
      }
    }
    return this.#byPathPrefix(path, query);
  }

  /** Path-style: `/{hostname}/{path}`. */
  #byPathPrefix(path: string, query: string): Resolved | undefined | Promise<Resolved | undefined> {
    const slash = path.indexOf("/", 1);
    const segment = slash === -1 ? path.slice(1) : path.slice(1, slash);
    let hostname: string;
    try {
      hostname = decodeURIComponent(segment).toLowerCase();
    } catch {
      return undefined;
    }
    if (hostname === "" || hostname.length > 253) return undefined;
    const pathAndQuery = normalizedPathAndQuery((slash === -1 ? "/" : path.slice(slash)) + query);
    const pathPrefix = `/${segment}`;
    const distribution = this.#distribution(hostname);
    if (distribution instanceof Promise) {
      return distribution.then((found) =>
        found ? { distribution: found, pathAndQuery, pathPrefix } : undefined,
      );
    }
    return distribution ? { distribution, pathAndQuery, pathPrefix } : undefined;
  }

  #distribution(hostname: string): DistributionRow | undefined | Promise<DistributionRow | undefined> {
    const now = this.clock.now().getTime();
    const known = this.#hosts.get(hostname);
    if (known && known.expires > now) return known.distribution;
    let lookup = this.#lookups.get(hostname);
    if (!lookup) {
      lookup = this.cdn
        .distributionForHost(hostname)
        // A reserved name held by a customer row never resolves: the path-style form stays the platform's.
        .then((found) => (found && mayServe(found, this.config) ? found : undefined))
        // The store away (PostgreSQL restarting): what was last read of the name still serves, so
        // cached objects and origins stay reachable; a name never read fails (503).
        .catch((error: unknown) => {
          if (known && isStoreUnavailable(error)) return known.distribution;
          throw error;
        })
        .finally(() => this.#lookups.delete(hostname));
      this.#lookups.set(hostname, lookup);
      lookup.then(
        (distribution) => {
          // Names that match nothing are remembered too; keep the memory bounded.
          if (this.#hosts.size >= MAX_REMEMBERED_HOSTS) this.#hosts.clear();
          this.#hosts.set(hostname, {
            distribution,
            expires: this.clock.now().getTime() + DISTRIBUTION_TTL_MS,
          });
        },
        () => undefined,
      );
    }
    return lookup;
  }
}
