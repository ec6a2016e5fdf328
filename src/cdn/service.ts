import { randomUUID } from "node:crypto";
import type { FastifyBaseLogger } from "fastify";
import { type Bus, unlessBusUnavailable } from "../bus.ts";
import { type Clock, nowIso } from "../clock.ts";
import type { Config } from "../config.ts";
import type { FieldError } from "../http/errors.ts";
import type { Page } from "../http/pagination.ts";
import { isUuid, timeOrderedUuid } from "../ids.ts";
import { checkUrlTarget } from "../net/address-guard.ts";
import { readJson, writeJson } from "../store/codec.ts";
import { type Executor, type Transact, transactor } from "../store/transactions.ts";
import {
  ChallengeResolver,
  challengeRecordName,
  claimExpiresAt,
  type HostnameClaimTokens,
  hostnameVerificationOf,
  isExpiredClaim,
  isPendingClaim,
  newHostnameToken,
} from "./hostname-verification.ts";
import type { PurgeSync } from "./purge-sync.ts";
import { type DistributionRepository, HostnameTakenError } from "./repository.ts";
import { mayServe, reservedHostReason } from "./reserved-hosts.ts";
import {
  type CreateDistributionBody,
  type Distribution,
  HOSTNAME_PATTERN,
  ORIGIN_URL_WORDS,
  type Purge,
  type UpdateDistributionBody,
} from "./schemas.ts";
import type { DistributionChanges, DistributionRow, PurgeRow } from "./tables.ts";

const HOSTNAME = new RegExp(HOSTNAME_PATTERN);

export const DEFAULT_TTL_S = 3600;

/** Bus channel: a distribution was created, changed or deleted; edges drop what they know of it. */
export const DISTRIBUTION_CHANNEL = "cdn.distribution";

export interface DistributionChange {
  id: string;
  hostname: string;
  /** The cached objects no longer reflect the origin (origin changed or distribution deleted). */
  dropCache: boolean;
  /** The distribution is gone: edges forget everything they kept for it. */
  deleted?: true;
}

export type CreateOutcome =
  | { outcome: "created"; distribution: Distribution }
  | { outcome: "invalid"; errors: FieldError[] }
  | { outcome: "hostname_taken" }
  /**
   * Another organization claims the name without having verified it: the TXT record that would let
   * this organization take it over is not (yet) in DNS; `reason` says what DNS answered. The claim
   * stops holding the name at `claimExpiresAt`.
   */
  | {
      outcome: "hostname_claimable";
      recordName: string;
      recordValue: string;
      reason: string;
      claimExpiresAt: string;
    }
  /** As `hostname_claimable`, but DNS could not be asked (timeout, SERVFAIL): `code` is the resolver's. */
  | { outcome: "lookup_failed"; recordName: string; recordValue: string; code: string };

export type GetOutcome = { outcome: "found"; distribution: Distribution } | { outcome: "not_found" };

export type UpdateOutcome =
  | { outcome: "updated"; distribution: Distribution }
  | { outcome: "invalid"; errors: FieldError[] }
  /** A library's distribution keeps the origin the platform gave it. */
  | { outcome: "library_distribution" }
  | { outcome: "not_found" };

export type DeleteOutcome =
  | { outcome: "deleted"; distribution: Distribution }
  /** A library's distribution goes with its library only. */
  | { outcome: "library_distribution" }
  | { outcome: "not_found" };

export type VerifyOutcome =
  | { outcome: "verified"; distribution: Distribution }
  /** The TXT record that proves the name is not (yet) in DNS; `reason` says what DNS answered. */
  | { outcome: "record_missing"; recordName: string; recordValue: string; reason: string }
  /** DNS could not be asked (timeout, SERVFAIL, refused): `code` is the resolver's. */
  | { outcome: "lookup_failed"; recordName: string; code: string }
  /** No token: a library's distribution (the platform's own name), or one an older version made. */
  | { outcome: "nothing_to_verify" }
  | { outcome: "not_found" };

export type ReleaseOutcome =
  /** `was`: the name's verification status when it was released. */
  | { outcome: "released"; distribution: DistributionRow; was: "pending" | "verified" }
  /** The name is verified (or has no token, as before verification): released only when forced. */
  | { outcome: "verified" }
  /** A library's own name goes with its library only. */
  | { outcome: "library_distribution" }
  | { outcome: "not_found" };

export type PurgeOutcome = { outcome: "purged" } | { outcome: "not_found" };

export type PurgeListOutcome = { outcome: "listed"; rows: Purge[]; total: number } | { outcome: "not_found" };

/** A distribution as the API shows it; its verification only on a platform that verifies names. */
export function toDistribution(
  row: DistributionRow,
  config: Pick<Config, "cdnHostnameVerification" | "cdnHostnameClaimTtlMs">,
) {
  const distribution: Distribution = {
    id: row.id,
    hostname: row.hostname,
    origin_url: row.origin_url,
    default_ttl_s: row.default_ttl_s,
    status: row.status,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
  const verification = hostnameVerificationOf(row, config);
  if (verification) distribution.hostname_verification = verification;
  return distribution;
}

const toPurge = (row: PurgeRow): Purge => ({
  id: row.id,
  distribution_id: row.distribution_id,
  paths: readJson<string[]>(row.paths) ?? [],
  created_at: row.created_at,
});

/** Distributions and purges: the control plane of the CDN. */
export class CdnService {
  private readonly transact: Transact;
  private readonly challenges: ChallengeResolver;

  constructor(
    private readonly distributions: DistributionRepository,
    private readonly config: Config,
    private readonly clock: Clock,
    private readonly bus: Bus,
    /** Cross-node purge propagation; the edge role serves its other side. */
    readonly purgeSync: PurgeSync,
    private readonly claimTokens: HostnameClaimTokens,
    private readonly logger: FastifyBaseLogger,
  ) {
    this.transact = transactor(distributions.db);
    this.challenges = new ChallengeResolver(config);
  }

  /**
   * A library's own distribution (`{library_id}.{CUMULO_MEDIA_DOMAIN}`), created inside the
   * library's transaction; its origin is Cumulo's media store.
   */
  async createLibraryDistribution(
    executor: Executor,
    input: { organizationId: string; libraryId: string },
  ): Promise<{ id: string; hostname: string }> {
    const now = nowIso(this.clock);
    const id = randomUUID();
    const hostname = `${input.libraryId}.${this.config.mediaDomain}`;
    await this.distributions.insert(executor, {
      id,
      organization_id: input.organizationId,
      hostname,
      origin_url: `media://${input.libraryId}`,
      default_ttl_s: DEFAULT_TTL_S,
      status: "active",
      library_id: input.libraryId,
      hostname_token: null,
      hostname_verified_at: null,
      created_at: now,
      updated_at: now,
    });
    return { id, hostname };
  }

  /** Removes a distribution inside the caller's transaction; edges stop serving it within a second. */
  async deleteDistribution(executor: Executor, organizationId: string, id: string): Promise<boolean> {
    return this.distributions.delete(executor, organizationId, id);
  }

  /**
   * The checks of a distribution's fields that its schema cannot make: a reserved host name, an
   * origin that is not http(s) or resolves to a private address. Anything but a string is left to
   * the schema.
   */
  async checkFields(fields: { hostname?: unknown; origin_url?: unknown }): Promise<FieldError[]> {
    const errors = [
      typeof fields.hostname === "string" ? this.checkHostname(fields.hostname) : undefined,
      typeof fields.origin_url === "string" ? await this.checkOrigin(fields.origin_url) : undefined,
    ];
    return errors.filter((error) => error !== undefined);
  }

  /** An origin must be http(s) and, unless private origins are allowed, resolve to public addresses. */
  private async checkOrigin(originUrl: string): Promise<FieldError | undefined> {
    // A name that does not resolve (yet) passes; the edge's connect-time check still applies once it
    // resolves (until then the edge answers 502).
    const target = await checkUrlTarget(originUrl, this.config.originAllowPrivate);
    if (target.outcome === "public") return undefined;
    const message =
      target.outcome === "not_http"
        ? `The origin_url field has an invalid format. It must be ${ORIGIN_URL_WORDS}.`
        : `The origin_url field must reach a public address: ${target.reason}.`;
    return { field: "origin_url", code: "validation_format", message };
  }

  /**
   * Tells the edges; with Redis away the change still stands (it is committed): they read names
   * again within half a second, and drop their caches when they reconnect.
   */
  private async announce(change: DistributionChange): Promise<void> {
    await this.bus.publish(DISTRIBUTION_CHANNEL, JSON.stringify(change)).catch(unlessBusUnavailable);
  }

  /** A host name the platform keeps for itself (its own names, IP literals, the media domain) is refused. */
  private checkHostname(hostname: string): FieldError | undefined {
    const reserved = reservedHostReason(hostname, this.config);
    if (reserved === undefined) return undefined;
    return {
      field: "hostname",
      code: "validation_format",
      message: `The hostname field must not name a host reserved for the platform: ${reserved}.`,
    };
  }

  async create(organizationId: string, body: CreateDistributionBody): Promise<CreateOutcome> {
    const errors = await this.checkFields(body);
    // A reserved name that a distribution already has (a library's own) is taken, like any other.
    const reservedOnly = errors.length === 1 && errors[0]?.field === "hostname";
    if (reservedOnly && (await this.distributions.findByHostname(body.hostname.toLowerCase()))) {
      return { outcome: "hostname_taken" };
    }
    if (errors.length > 0) return { outcome: "invalid", errors };
    const now = nowIso(this.clock);
    const row: DistributionRow = {
      id: randomUUID(),
      organization_id: organizationId,
      hostname: body.hostname.toLowerCase(),
      origin_url: body.origin_url,
      default_ttl_s: body.default_ttl_s ?? DEFAULT_TTL_S,
      status: "active",
      library_id: null,
      hostname_token: newHostnameToken(),
      // Without verification the first organization to name a host is trusted with it.
      hostname_verified_at: this.config.cdnHostnameVerification === "dns" ? null : now,
      created_at: now,
      updated_at: now,
    };
    try {
      await this.transact((trx) => this.distributions.insert(trx, row));
    } catch (error) {
      if (error instanceof HostnameTakenError) return this.#takeOverPendingClaim(row);
      throw error;
    }
    // A new id has nothing cached; edges only forget what they said of the name.
    await this.announce({ id: row.id, hostname: row.hostname, dropCache: false });
    return { outcome: "created", distribution: toDistribution(row, this.config) };
  }

  /**
   * The new distribution's name is taken. When the platform verifies names, another organization's
   * pending claim does not hold it against an organization that proves control: that one publishes
   * its claim token and creates again; the claim is then deleted and the new distribution created
   * verified, in one transaction. Nor does it hold it once expired (CUMULO_CDN_HOSTNAME_CLAIM_TTL_HOURS):
   * the claim is then deleted and the new distribution created pending, with no lookup. A verified
   * name, a library's, or the organization's own stays taken. The DNS lookup happens outside the
   * transaction.
   */
  async #takeOverPendingClaim(row: DistributionRow): Promise<CreateOutcome> {
    if (this.config.cdnHostnameVerification !== "dns") return { outcome: "hostname_taken" };
    const holder = await this.distributions.findByHostname(row.hostname);
    if (!holder || !isPendingClaim(holder) || holder.organization_id === row.organization_id) {
      return { outcome: "hostname_taken" };
    }
    if (isExpiredClaim(holder, this.config, this.clock.now())) {
      return this.#replaceClaim(
        holder,
        row,
        "cdn host name taken from another organization's expired pending claim",
      );
    }
    const token = this.claimTokens.tokenFor(row.organization_id, row.hostname);
    const lookup = await this.challenges.lookUp({ hostname: row.hostname, token });
    const recordName = challengeRecordName(row.hostname);
    switch (lookup.outcome) {
      case "missing":
        return {
          outcome: "hostname_claimable",
          recordName,
          recordValue: token,
          reason: lookup.reason,
          claimExpiresAt: claimExpiresAt(holder, this.config).toISOString(),
        };
      case "failed":
        return { outcome: "lookup_failed", recordName, recordValue: token, code: lookup.code };
    }
    const claimed: DistributionRow = {
      ...row,
      hostname_token: token,
      hostname_verified_at: nowIso(this.clock),
    };
    return this.#replaceClaim(
      holder,
      claimed,
      "cdn host name taken over from another organization's pending claim by proof of control",
    );
  }

  /** Deletes another organization's pending claim and creates `replacement` for its name, in one transaction. */
  async #replaceClaim(
    holder: DistributionRow,
    replacement: DistributionRow,
    logMessage: string,
  ): Promise<CreateOutcome> {
    const replaced = await this.transact(async (trx) => {
      // Verified or deleted since it was read: the name is no pending claim of the holder any more.
      if (!(await this.distributions.deletePendingClaim(trx, holder.organization_id, holder.id)))
        return false;
      await this.distributions.insert(trx, replacement);
      return true;
    }).catch((error: unknown) => {
      if (error instanceof HostnameTakenError) return false;
      throw error;
    });
    if (!replaced) return { outcome: "hostname_taken" };
    this.logger.info(
      {
        hostname: replacement.hostname,
        from_organization_id: holder.organization_id,
        from_distribution_id: holder.id,
        to_organization_id: replacement.organization_id,
        to_distribution_id: replacement.id,
      },
      logMessage,
    );
    await this.announce({ id: holder.id, hostname: holder.hostname, dropCache: true, deleted: true });
    await this.announce({ id: replacement.id, hostname: replacement.hostname, dropCache: false });
    return { outcome: "created", distribution: toDistribution(replacement, this.config) };
  }

  async get(organizationId: string, id: string): Promise<GetOutcome> {
    const row = await this.distributions.find(organizationId, id);
    return row
      ? { outcome: "found", distribution: toDistribution(row, this.config) }
      : { outcome: "not_found" };
  }

  async list(organizationId: string, page: Page): Promise<{ rows: Distribution[]; total: number }> {
    const { rows, total } = await this.distributions.list(organizationId, page);
    return { rows: rows.map((row) => toDistribution(row, this.config)), total };
  }

  async update(organizationId: string, id: string, body: UpdateDistributionBody): Promise<UpdateOutcome> {
    const current = await this.distributions.find(organizationId, id);
    if (!current) return { outcome: "not_found" };
    if (body.origin_url !== undefined && body.origin_url !== current.origin_url) {
      if (current.library_id !== null) return { outcome: "library_distribution" };
      const errors = await this.checkFields({ origin_url: body.origin_url });
      if (errors.length > 0) return { outcome: "invalid", errors };
    }
    const changes: DistributionChanges = { updated_at: nowIso(this.clock) };
    if (body.origin_url !== undefined) changes.origin_url = body.origin_url;
    if (body.default_ttl_s !== undefined) changes.default_ttl_s = body.default_ttl_s;
    if (body.status !== undefined) changes.status = body.status;
    const row = await this.transact(async (trx) => {
      if (!(await this.distributions.update(trx, organizationId, id, changes))) return undefined;
      return this.distributions.find(organizationId, id, trx);
    });
    if (!row) return { outcome: "not_found" };
    await this.announce({
      id: row.id,
      hostname: row.hostname,
      dropCache: row.origin_url !== current.origin_url,
    });
    return { outcome: "updated", distribution: toDistribution(row, this.config) };
  }

  /** Deletes a distribution through the API; a library's distribution goes with its library only. */
  async delete(organizationId: string, id: string): Promise<DeleteOutcome> {
    const current = await this.distributions.find(organizationId, id);
    if (!current) return { outcome: "not_found" };
    if (current.library_id !== null) return { outcome: "library_distribution" };
    const deleted = await this.transact((trx) => this.distributions.delete(trx, organizationId, id));
    if (!deleted) return { outcome: "not_found" };
    await this.announce({ id: current.id, hostname: current.hostname, dropCache: true, deleted: true });
    return { outcome: "deleted", distribution: toDistribution(current, this.config) };
  }

  /**
   * Verifies the distribution's host name by its TXT record; once verified, every edge serves it
   * under its host name within a second. The DNS lookup happens outside the transaction.
   */
  async verifyHostname(organizationId: string, id: string): Promise<VerifyOutcome> {
    const current = await this.distributions.find(organizationId, id);
    if (!current) return { outcome: "not_found" };
    if (current.hostname_token === null) return { outcome: "nothing_to_verify" };
    if (current.hostname_verified_at !== null) {
      return { outcome: "verified", distribution: toDistribution(current, this.config) };
    }
    const challenge = { hostname: current.hostname, token: current.hostname_token };
    const lookup = await this.challenges.lookUp(challenge);
    const recordName = challengeRecordName(challenge.hostname);
    switch (lookup.outcome) {
      case "missing":
        return { outcome: "record_missing", recordName, recordValue: challenge.token, reason: lookup.reason };
      case "failed":
        return { outcome: "lookup_failed", recordName, code: lookup.code };
    }
    const now = nowIso(this.clock);
    const row = await this.transact(async (trx) => {
      await this.distributions.markHostnameVerified(trx, organizationId, id, challenge.token, now);
      // Verified by this request or a concurrent one; gone when deleted meanwhile.
      return this.distributions.find(organizationId, id, trx);
    });
    if (!row) return { outcome: "not_found" };
    await this.announce({ id: row.id, hostname: row.hostname, dropCache: false });
    return { outcome: "verified", distribution: toDistribution(row, this.config) };
  }

  /**
   * An operator's release of a host name (`cumulo cdn release-hostname`): deletes the distribution
   * that has it, in whichever organization, when it is a pending claim; a verified one only when
   * forced; a library's never. Every edge forgets it as after a delete through the API.
   */
  async releaseHostname(hostname: string, options: { force: boolean }): Promise<ReleaseOutcome> {
    const holder = await this.distributions.findByHostname(hostname.toLowerCase());
    if (!holder) return { outcome: "not_found" };
    if (holder.library_id !== null) return { outcome: "library_distribution" };
    if (!options.force && !isPendingClaim(holder)) return { outcome: "verified" };
    const released = await this.transact((trx) =>
      options.force
        ? this.distributions.delete(trx, holder.organization_id, holder.id)
        : this.distributions.deletePendingClaim(trx, holder.organization_id, holder.id),
    );
    // Verified or deleted since it was read: decide again on what holds the name now.
    if (!released) return this.releaseHostname(hostname, options);
    this.logger.info(
      { hostname: holder.hostname, organization_id: holder.organization_id, distribution_id: holder.id },
      "cdn host name released by the operator",
    );
    await this.announce({ id: holder.id, hostname: holder.hostname, dropCache: true, deleted: true });
    return {
      outcome: "released",
      distribution: holder,
      was: isPendingClaim(holder) ? "pending" : "verified",
    };
  }

  /**
   * Records the purge and applies it: this node's edge cache is purged before this returns, and
   * with Redis every live edge node has acknowledged it (or two seconds have passed).
   */
  async purge(organizationId: string, id: string, paths: string[]): Promise<PurgeOutcome> {
    const distribution = await this.distributions.find(organizationId, id);
    if (!distribution) return { outcome: "not_found" };
    const recorded = await this.transact(async (trx) => {
      // Re-read inside the transaction: a concurrent delete makes the purge a 404, not a dangling row.
      if (!(await this.distributions.find(organizationId, id, trx))) return false;
      await this.distributions.insertPurge(trx, {
        id: timeOrderedUuid(),
        organization_id: organizationId,
        distribution_id: id,
        paths: writeJson(paths) ?? "[]",
        created_at: nowIso(this.clock),
      });
      return true;
    });
    if (!recorded) return { outcome: "not_found" };
    await this.purgeSync.purge(id, paths);
    return { outcome: "purged" };
  }

  async listPurges(organizationId: string, id: string, page: Page): Promise<PurgeListOutcome> {
    if (!(await this.distributions.find(organizationId, id))) return { outcome: "not_found" };
    const { rows, total } = await this.distributions.listPurges(organizationId, id, page);
    return { outcome: "listed", rows: rows.map(toPurge), total };
  }

  /**
   * Distributions under reserved names that an edge must not serve: rows a store written before the
   * names were reserved may hold.
   */
  async unservableDistributions(): Promise<DistributionRow[]> {
    const unservable: DistributionRow[] = [];
    for await (const row of this.distributions.scanAll()) {
      if (!mayServe(row, this.config)) unservable.push(row);
    }
    return unservable;
  }

  /**
   * Any organization's distribution with this host name: what an edge serves for it. Text that is
   * no host name (a viewer's Host header or path segment: NUL, spaces...) names none, unqueried.
   */
  async distributionForHost(hostname: string): Promise<DistributionRow | undefined> {
    if (!HOSTNAME.test(hostname)) return undefined;
    return (await this.distributions.findByHostname(hostname)) ?? this.#libraryDistribution(hostname);
  }

  /**
   * The organization's distribution with this host name, if any (analytics filter): also a library's
   * name under the current media domain, as its video URLs and the edge give it.
   */
  async findByHostname(organizationId: string, hostname: string): Promise<DistributionRow | undefined> {
    const name = hostname.toLowerCase();
    const found = await this.distributions.findByHostnameInOrganization(organizationId, name);
    if (found) return found;
    const library = await this.#libraryDistribution(name);
    return library?.organization_id === organizationId ? library : undefined;
  }

  /**
   * A library's own name under the current media domain names its distribution, also when that was
   * made under an earlier CUMULO_MEDIA_DOMAIN and keeps that name (which still answers too).
   */
  async #libraryDistribution(hostname: string): Promise<DistributionRow | undefined> {
    const libraryId = hostname.endsWith(`.${this.config.mediaDomain}`)
      ? hostname.slice(0, -this.config.mediaDomain.length - 1)
      : undefined;
    return libraryId && isUuid(libraryId) ? this.distributions.findByLibrary(libraryId) : undefined;
  }
}
