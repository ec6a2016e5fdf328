import { randomUUID } from "node:crypto";
import { nowIso } from "../clock.ts";
import type { Page } from "../http/pagination.ts";
import type { JobHandler } from "../jobs/queue.ts";
import { writeJson } from "../store/codec.ts";
import type { MediaDeps } from "./context.ts";
import { toSecurity } from "./presenters.ts";
import type { LibraryFilters } from "./repository.ts";
import type {
  AccessRule,
  CreateLibraryInput,
  SecuritySettings,
  UpdateLibraryInput,
  UpdateSecurityInput,
} from "./schemas.ts";
import type { LibraryRow } from "./tables.ts";
import { libraryBlobPrefix } from "./urls.ts";

export const PROVISION_LIBRARY_JOB = "media.provision-library";

export type LibraryOutcome = { outcome: "updated"; library: LibraryRow } | { outcome: "not_found" };
export type SecurityOutcome = { outcome: "updated"; security: SecuritySettings } | { outcome: "not_found" };

const NEW_REFERRER_RULE: AccessRule = { action: "allow", values: [], enabled: false };
const NEW_COUNTRY_RULE: AccessRule = { action: "deny", values: [], enabled: false };

const unique = (values: string[]): string[] => [...new Set(values)];

export class LibraryService {
  /**
   * Developer mode's state transitions of the organization's libraries: `instant` provisions a new
   * library as soon as it is created, `stop` leaves it `provisioning`; none: the job provisions it.
   */
  transition: ((organizationId: string) => "instant" | "stop" | undefined) | undefined;

  constructor(private readonly deps: MediaDeps) {}

  find(organizationId: string, id: string): Promise<LibraryRow | undefined> {
    return this.deps.libraries.findLibrary(organizationId, id);
  }

  /**
   * A library starts `provisioning` with its own distribution, created in the same transaction; the
   * provisioning job (queued in it too) makes it `active`.
   */
  async create(
    organizationId: string,
    userUuid: string,
    input: CreateLibraryInput,
  ): Promise<{ outcome: "created"; library: LibraryRow }> {
    const { transact, config, cdn, jobs, libraries, clock } = this.deps;
    const now = nowIso(clock);
    const id = randomUUID();
    const defaultPrivacy = input.default_privacy ?? "unlisted";
    const library = await transact(async (trx) => {
      const distribution = await cdn.createLibraryDistribution(trx, { organizationId, libraryId: id });
      const library: LibraryRow = {
        id,
        organization_id: organizationId,
        name: input.name,
        description: input.description ?? "",
        usage_type: input.usage_type ?? "video_on_demand",
        default_privacy: defaultPrivacy,
        status: "provisioning",
        region: input.region ?? (config.regions[0] as string),
        distribution_id: distribution.id,
        whitelist_referrers: writeJson(NEW_REFERRER_RULE) as string,
        blocked_countries: writeJson(NEW_COUNTRY_RULE) as string,
        video_privacy: defaultPrivacy,
        created_by: userUuid,
        updated_by: null,
        created_at: now,
        updated_at: now,
      };
      await libraries.insert(trx, library);
      await jobs.enqueue(trx, PROVISION_LIBRARY_JOB, { libraryId: id });
      return library;
    });
    jobs.notify();
    if (this.transition?.(organizationId) === "instant") await this.#provision(id);
    return { outcome: "created", library };
  }

  list(organizationId: string, filters: LibraryFilters, page: Page) {
    return this.deps.libraries.list(organizationId, filters, page);
  }

  async update(
    organizationId: string,
    userUuid: string,
    id: string,
    input: UpdateLibraryInput,
  ): Promise<LibraryOutcome> {
    const { libraries, clock } = this.deps;
    const library = await libraries.updateLibrary(organizationId, id, {
      ...(input.name !== undefined ? { name: input.name } : {}),
      ...(input.description !== undefined ? { description: input.description } : {}),
      ...(input.default_privacy !== undefined ? { default_privacy: input.default_privacy } : {}),
      updated_by: userUuid,
      updated_at: nowIso(clock),
    });
    return library ? { outcome: "updated", library } : { outcome: "not_found" };
  }

  /**
   * Removes the library and everything in it in one transaction: videos (with subtitles and
   * thumbnails), folders, players, webhook endpoints and deliveries, and its distribution. Its
   * files go once the transaction has committed.
   */
  async delete(organizationId: string, id: string): Promise<{ outcome: "deleted" | "not_found" }> {
    const { transact, libraries, folders, videos, players, webhookRepository, webhooks, cdn, removals } =
      this.deps;
    const deleted = await transact(async (trx) => {
      const library = await libraries.lockLibrary(trx, organizationId, id);
      if (!library) return undefined;
      await videos.deleteLibrary(trx, id);
      await folders.deleteLibrary(trx, id);
      await players.deleteLibrary(trx, id);
      const endpointIds = await webhookRepository.deleteLibrary(trx, id);
      await cdn.deleteDistribution(trx, organizationId, library.distribution_id);
      await libraries.delete(trx, id);
      return { endpointIds, removal: await removals.queue(trx, { prefixes: [libraryBlobPrefix(id)] }) };
    });
    if (!deleted) return { outcome: "not_found" };
    // Attempts a dispatcher holds for the endpoints are not sent.
    webhooks.endpointsChanged(deleted.endpointIds);
    await removals.carryOut(deleted.removal);
    return { outcome: "deleted" };
  }

  /** Given rules replace the stored ones, omitted ones are kept. */
  async updateSecurity(
    organizationId: string,
    userUuid: string,
    id: string,
    input: UpdateSecurityInput,
  ): Promise<SecurityOutcome> {
    const { libraries, clock } = this.deps;
    const changes: Partial<LibraryRow> = { updated_by: userUuid, updated_at: nowIso(clock) };
    if (input.referrers) {
      changes.whitelist_referrers = writeJson({
        action: input.referrers.action,
        values: unique(input.referrers.values.map((value) => value.toLowerCase())),
        enabled: input.referrers.enabled,
      }) as string;
    }
    if (input.countries) {
      changes.blocked_countries = writeJson({
        action: input.countries.action,
        values: unique(input.countries.values.map((value) => value.toUpperCase())),
        enabled: input.countries.enabled,
      }) as string;
    }
    if (input.video_privacy) changes.video_privacy = input.video_privacy;
    const library = await libraries.updateLibrary(organizationId, id, changes);
    return library ? { outcome: "updated", security: toSecurity(library) } : { outcome: "not_found" };
  }

  /** The job that finishes a new library (see `#provision`). */
  provisioningHandler(): JobHandler<{ libraryId: string }> {
    const { libraries, clock } = this.deps;
    return {
      kind: PROVISION_LIBRARY_JOB,
      // A few store writes: a worker that died holding it is replaced quickly.
      leaseMs: 10_000,
      handle: ({ libraryId }) => this.#provision(libraryId),
      onGiveUp: async ({ libraryId }) => {
        await libraries.transition(libraryId, "provisioning", "failed", nowIso(clock));
      },
    };
  }

  /** Checks a `provisioning` library's distribution exists, then marks it `active`. */
  async #provision(libraryId: string): Promise<void> {
    const { libraries, clock } = this.deps;
    const library = await libraries.findById(libraryId);
    if (library?.status !== "provisioning") return;
    if (this.transition?.(library.organization_id) === "stop") return;
    if (!(await libraries.hasDistribution(libraryId, library.distribution_id)))
      throw new Error(`library ${libraryId} has no distribution`);
    await libraries.transition(libraryId, "provisioning", "active", nowIso(clock));
  }
}
