import { randomUUID } from "node:crypto";
import { type Clock, nowIso, stampDue } from "../clock.ts";
import { readBool } from "../store/codec.ts";
import type { Transact, Trx } from "../store/transactions.ts";
import { isStoreUnavailable } from "../store/unavailable.ts";
import type { AuthCache } from "./auth-cache.ts";
import { displayPrefix, generateApiKey, hashSecret } from "./keys.ts";
import type { IdentityRepository } from "./repository.ts";
import { SESSION_IDLE_MS, SESSION_TOUCH_MS } from "./sessions.ts";
import type { ApiKeyKind } from "./tables.ts";

/** Who a request acts as, once its key is verified. */
export interface AuthContext {
  organizationId: string;
  /** Integer user id (cloud `user_id`). */
  userId: number;
  /** User UUID (media `created_by`). */
  userUuid: string;
  /** The API key presented; undefined when a console session authenticated the request. */
  keyId?: number;
  /** The console session presented (its cookie); undefined for API keys. */
  sessionId?: number;
  kind: ApiKeyKind;
  readOnly: boolean;
  restricted: boolean;
  billingAccountId: number | null;
}

/**
 * What per-credential budgets (rate limit, upload slots) count against: the key, or for console
 * sessions the user, so signing in again does not give a fresh budget.
 */
export const credentialOf = (auth: AuthContext): string =>
  auth.sessionId === undefined ? `key:${auth.keyId}` : `user:${auth.userId}`;

/**
 * Who made something that acts for them later (an upload authorization): the API key (`k{id}`) or,
 * for a console session, the person (`u{id}`). What they made stops working when they do.
 */
export type Issuer = `k${number}` | `u${number}`;

export const issuerOf = (auth: AuthContext): Issuer =>
  auth.sessionId === undefined ? `k${auth.keyId ?? 0}` : `u${auth.userId}`;

/** A live console session: who it acts as, and what the console shows of it. */
export interface SessionIdentity {
  auth: AuthContext;
  email: string;
  organizationName: string;
}

/** A live console session as one of a request's cookies names it. */
export interface LiveSession {
  token: string;
  id: number;
  lastSeenAt: string;
  identity: SessionIdentity;
}

export interface ApiKeySummary {
  id: number;
  name: string;
  prefix: string;
  kind: ApiKeyKind;
  read_only: boolean;
  created_at: string;
  last_used_at: string | null;
}

export interface CreatedOrganization {
  organization_id: string;
  user_id: number;
  billing_account_id: number;
  api_key: string;
}

export const DEFAULT_ORGANIZATION_NAME = "Default";

/** The default organization's rows a whole-store reset to bootstrap keeps (IdentityService.bootstrapRows). */
export interface BootstrapRows {
  organizationId: string;
  userId: number;
  billingAccountId: number | undefined;
  keyId: number | undefined;
}

/** A key's `last_used_at` is written at most this often, so authenticating rarely writes. */
const LAST_USE_PRECISION_MS = 60 * 1000;

/** A cloud token (an API key of kind `cloud_token`) as stored; `token` only right after creation. */
export interface CloudTokenRecord {
  id: number;
  billing_account_id: number;
  user_id: number;
  consumer_id: string;
  description: string;
  restricted: boolean;
  created_at: string;
  updated_at: string;
}

export interface BillingAccountSummary {
  id: number;
  display_name: string;
  is_default: boolean;
  created_at: string;
}

/**
 * The caller's organization was removed while its request ran (`cumulo orgs delete`): like a row the
 * request refers to gone meanwhile, which it is on PostgreSQL (a foreign key), a 404.
 */
export class OrganizationGoneError extends Error {
  constructor(organizationId: string) {
    super(`organization ${organizationId} was removed while the request ran`);
    this.name = "OrganizationGoneError";
  }
}

export class IdentityService {
  constructor(
    private readonly repository: IdentityRepository,
    private readonly transact: Transact,
    private readonly clock: Clock,
    private readonly cache?: AuthCache,
  ) {}

  /**
   * After a key was revoked or changed: every node's auth cache (this one's too) has dropped it when
   * this resolves, but for a node that did not answer within `KEY_CHANGE_ACK_TIMEOUT_MS`.
   */
  async keyChanged(): Promise<void> {
    await this.cache?.changed();
  }

  /** An organization with its first user, default billing account and an admin key (secret returned once). */
  createOrganization(name: string, adminKey: string = generateApiKey()): Promise<CreatedOrganization> {
    return this.transact((trx) => this.#insertOrganization(trx, name, adminKey));
  }

  async #insertOrganization(trx: Trx, name: string, adminKey: string): Promise<CreatedOrganization> {
    const now = nowIso(this.clock);
    const organizationId = randomUUID();
    await this.repository.insertOrganization(trx, { id: organizationId, name, created_at: now });
    const user = await this.repository.insertUser(trx, {
      uuid: randomUUID(),
      organization_id: organizationId,
      name: "admin",
      email: "",
      created_at: now,
    });
    const billing = await this.#insertDefaultBillingAccount(trx, organizationId, name, now);
    await this.repository.insertApiKey(
      this.keyRow(organizationId, user.id, "admin", adminKey, false, now),
      trx,
    );
    return {
      organization_id: organizationId,
      user_id: user.id,
      billing_account_id: billing.id,
      api_key: adminKey,
    };
  }

  #insertDefaultBillingAccount(trx: Trx, organizationId: string, name: string, now: string) {
    return this.repository.insertBillingAccount(trx, {
      organization_id: organizationId,
      display_name: `${name} billing`,
      is_default: true,
      created_at: now,
    });
  }

  /**
   * What a whole-store reset to bootstrap keeps, read in its transaction: the default organization
   * with its first user, its default billing account and the key it was created with (the bootstrap
   * key when one is configured, else its first admin key). Undefined without a default organization.
   */
  async bootstrapRows(trx: Trx, bootstrapKey: string | undefined): Promise<BootstrapRows | undefined> {
    const organization = await this.repository.findOrganizationByName(trx, DEFAULT_ORGANIZATION_NAME);
    const user = organization && (await this.repository.findFirstUser(trx, organization.id));
    if (!organization || !user) return undefined;
    const billing = await this.repository.findDefaultBillingAccount(trx, organization.id);
    const key = await this.repository.findBootstrapKey(
      trx,
      user.id,
      bootstrapKey === undefined ? undefined : hashSecret(bootstrapKey),
    );
    return {
      organizationId: organization.id,
      userId: user.id,
      billingAccountId: billing?.id,
      keyId: key?.id,
    };
  }

  /**
   * Completes the default organization once everything else is gone, in the reset's transaction: it
   * is made (as at first start) when there was none, and given back a default billing account and
   * its bootstrap key where they were gone. Without a bootstrap key a key made here is returned once.
   */
  async restoreBootstrap(
    trx: Trx,
    kept: BootstrapRows | undefined,
    bootstrapKey: string | undefined,
  ): Promise<{ generatedKey?: string }> {
    if (!kept) {
      const created = await this.#insertOrganization(
        trx,
        DEFAULT_ORGANIZATION_NAME,
        bootstrapKey ?? generateApiKey(),
      );
      return bootstrapKey ? {} : { generatedKey: created.api_key };
    }
    const now = nowIso(this.clock);
    if (kept.billingAccountId === undefined) {
      await this.#insertDefaultBillingAccount(trx, kept.organizationId, DEFAULT_ORGANIZATION_NAME, now);
    }
    if (kept.keyId !== undefined) return {};
    const secret = bootstrapKey ?? generateApiKey();
    await this.repository.insertApiKey(
      this.keyRow(kept.organizationId, kept.userId, bootstrapKey ? "bootstrap" : "admin", secret, false, now),
      trx,
    );
    return bootstrapKey ? {} : { generatedKey: secret };
  }

  async listOrganizations() {
    const rows = await this.repository.listOrganizations();
    return rows.map((row) => ({ id: row.id, name: row.name, created_at: row.created_at }));
  }

  async createApiKey(
    organizationId: string,
    options: { name: string; readOnly: boolean },
  ): Promise<
    | ({ outcome: "created"; api_key: string } & Omit<ApiKeySummary, "kind" | "last_used_at">)
    | { outcome: "organization_not_found" }
  > {
    const organization = await this.repository.findOrganization(organizationId);
    if (!organization) return { outcome: "organization_not_found" };
    const secret = generateApiKey();
    const now = nowIso(this.clock);
    const row = await this.transact(async (trx) => {
      const user = await this.repository.findFirstUser(trx, organizationId);
      if (!user) throw new OrganizationGoneError(organizationId);
      return this.repository.insertApiKey(
        this.keyRow(organizationId, user.id, options.name, secret, options.readOnly, now),
        trx,
      );
    });
    return {
      outcome: "created",
      id: row.id,
      name: row.name,
      prefix: row.prefix,
      read_only: readBool(row.read_only),
      created_at: row.created_at,
      api_key: secret,
    };
  }

  async listApiKeys(organizationId: string): Promise<ApiKeySummary[] | undefined> {
    if (!(await this.repository.findOrganization(organizationId))) return undefined;
    const rows = await this.repository.listApiKeys(organizationId, "organization");
    return rows.map((row) => ({
      id: row.id,
      name: row.name,
      prefix: row.prefix,
      kind: row.kind,
      read_only: readBool(row.read_only),
      created_at: row.created_at,
      last_used_at: row.last_used_at,
    }));
  }

  /** Revokes an organization API key of this organization; it is refused at once on every node. */
  async revokeOrganizationApiKey(
    organizationId: string,
    id: number,
  ): Promise<{ outcome: "revoked" | "not_found" }> {
    const revoked = await this.repository.revokeOrganizationApiKey(
      organizationId,
      "organization",
      id,
      nowIso(this.clock),
    );
    if (!revoked) return { outcome: "not_found" };
    await this.keyChanged();
    return { outcome: "revoked" };
  }

  async revokeApiKey(keyId: number): Promise<{ outcome: "revoked" | "not_found" }> {
    if (!(await this.repository.revokeApiKey(keyId, nowIso(this.clock)))) return { outcome: "not_found" };
    await this.keyChanged();
    return { outcome: "revoked" };
  }

  async authenticate(secret: string): Promise<AuthContext | undefined> {
    const keyHash = hashSecret(secret);
    const cached = this.cache?.get(keyHash);
    if (cached) return cached;
    const generation = this.cache?.generation ?? 0;
    const now = this.clock.now();
    const row = await this.repository.findActiveKeyByHash(keyHash, now.toISOString());
    if (!row) return undefined;
    if (row.last_used_at === null || stampDue(row.last_used_at, now, LAST_USE_PRECISION_MS)) {
      // The last-use stamp is a convenience: a store that took the key's read but not this write
      // (SQLite locked by another process past its wait) leaves it for the key's next use rather
      // than refusing the request with 503.
      await this.repository.touchApiKey(row.id, now.toISOString()).catch((error: unknown) => {
        if (!isStoreUnavailable(error)) throw error;
      });
    }
    const auth: AuthContext = {
      organizationId: row.organization_id,
      userId: row.user_id,
      userUuid: row.user_uuid,
      keyId: row.id,
      kind: row.kind,
      readOnly: readBool(row.read_only),
      restricted: readBool(row.restricted),
      billingAccountId: row.billing_account_id,
    };
    this.cache?.set(keyHash, auth, row.expires_at, generation);
    return auth;
  }

  /**
   * The live sessions among these cookie values, in their order (idle and absolute expiry by the
   * injected clock). None is marked as used: only the one a request runs as is (`useSession`).
   */
  async liveSessions(tokens: readonly string[]): Promise<LiveSession[]> {
    if (tokens.length === 0) return [];
    const now = this.clock.now();
    const tokenByHash = new Map(tokens.map((token) => [hashSecret(token), token]));
    const rows = await this.repository.findLiveSessions(
      [...tokenByHash.keys()],
      now.toISOString(),
      new Date(now.getTime() - SESSION_IDLE_MS).toISOString(),
    );
    const rowByHash = new Map(rows.map((row) => [row.token_hash, row]));
    return [...tokenByHash].flatMap(([hash, token]) => {
      const row = rowByHash.get(hash);
      if (!row) return [];
      const identity: SessionIdentity = {
        auth: {
          organizationId: row.organization_id,
          userId: row.user_id,
          userUuid: row.user_uuid,
          sessionId: row.id,
          kind: "organization",
          readOnly: readBool(row.read_only),
          restricted: false,
          billingAccountId: null,
        },
        email: row.email,
        organizationName: row.organization_name,
      };
      return [{ token, id: row.id, lastSeenAt: row.last_seen_at, identity }];
    });
  }

  /** Records that a request ran as the session, at most once a minute so reads do not each write. */
  async useSession(session: LiveSession): Promise<void> {
    const now = this.clock.now();
    if (stampDue(session.lastSeenAt, now, SESSION_TOUCH_MS)) {
      await this.repository.touchSession(session.id, now.toISOString());
    }
  }

  /** Ends the sessions of these cookie values (those already ended are skipped). */
  async endSessions(tokens: readonly string[]): Promise<void> {
    if (tokens.length > 0) await this.repository.deleteSessions(tokens.map(hashSecret));
  }

  /**
   * First start: make sure someone can log in. With a bootstrap key, the default organization exists
   * and holds that key, valid (CONTRACT 2; `restoredKey`: it had been revoked and is valid again);
   * with none and an empty store, a generated key is returned to be printed once.
   */
  ensureBootstrap(bootstrapKey: string | undefined): Promise<{ generatedKey?: string; restoredKey?: true }> {
    return this.repository.whileBootstrapping(() => this.#ensureBootstrap(bootstrapKey));
  }

  async #ensureBootstrap(
    bootstrapKey: string | undefined,
  ): Promise<{ generatedKey?: string; restoredKey?: true }> {
    if (bootstrapKey) {
      const existing = await this.repository.findKeyByHash(hashSecret(bootstrapKey));
      if (existing?.revoked_at === null) return {};
      // The setting names the key the default organization must have, as a developer mode reset
      // restores it too; a start that said "ready" while refusing it left CI jobs guessing.
      if (existing) {
        await this.repository.restoreApiKey(existing.id, nowIso(this.clock));
        await this.keyChanged();
        return { restoredKey: true };
      }
      const organizations = await this.repository.listOrganizations();
      const defaultOrganization = organizations.find((org) => org.name === DEFAULT_ORGANIZATION_NAME);
      if (!defaultOrganization) {
        await this.createOrganization(DEFAULT_ORGANIZATION_NAME, bootstrapKey);
        return {};
      }
      const now = nowIso(this.clock);
      await this.transact(async (trx) => {
        const user = await this.repository.findFirstUser(trx, defaultOrganization.id);
        if (!user) throw new Error("default organization has no user");
        await this.repository.insertApiKey(
          this.keyRow(defaultOrganization.id, user.id, "bootstrap", bootstrapKey, false, now),
          trx,
        );
      });
      return {};
    }
    if ((await this.repository.countOrganizations()) > 0) return {};
    const created = await this.createOrganization(DEFAULT_ORGANIZATION_NAME);
    return { generatedKey: created.api_key };
  }

  async listBillingAccounts(organizationId: string): Promise<BillingAccountSummary[]> {
    const rows = await this.repository.listBillingAccounts(organizationId);
    return rows.map((row) => ({
      id: row.id,
      display_name: row.display_name,
      is_default: readBool(row.is_default),
      created_at: row.created_at,
    }));
  }

  /** Whether the billing account exists and belongs to the organization. */
  async ownsBillingAccount(organizationId: string, id: number): Promise<boolean> {
    return (await this.repository.findBillingAccount(organizationId, id)) !== undefined;
  }

  async defaultBillingAccountId(organizationId: string): Promise<number | undefined> {
    return (await this.repository.defaultBillingAccount(organizationId))?.id;
  }

  async organizationName(organizationId: string): Promise<string | undefined> {
    return (await this.repository.findOrganization(organizationId))?.name;
  }

  /**
   * A cloud token: an API key acting as `auth`'s user, usable at once; the secret is returned once.
   * Undefined, and nothing created, when the billing account is not the organization's.
   */
  async createCloudToken(
    auth: AuthContext,
    options: { billingAccountId: number; description: string; restricted: boolean },
  ): Promise<{ record: CloudTokenRecord; token: string } | undefined> {
    const secret = generateApiKey();
    const now = nowIso(this.clock);
    // One statement, its own transaction: the account's check is part of the insert.
    const row = await this.repository.insertApiKeyChargedTo({
      ...this.keyRow(auth.organizationId, auth.userId, "cloud token", secret, false, now),
      kind: "cloud_token",
      description: options.description,
      restricted: options.restricted,
      billing_account_id: options.billingAccountId,
    });
    return row ? { record: toCloudToken(row), token: secret } : undefined;
  }

  async listCloudTokens(organizationId: string): Promise<CloudTokenRecord[]> {
    const rows = await this.repository.listApiKeys(organizationId, "cloud_token");
    return rows.map(toCloudToken);
  }

  async updateCloudToken(
    organizationId: string,
    id: number,
    changes: { description?: string; restricted?: boolean; billingAccountId?: number },
  ): Promise<{ outcome: "updated"; token: CloudTokenRecord } | { outcome: "not_found" }> {
    // A change that changes nothing writes nothing: `updated_at` moves only when the token changes.
    const current = await this.repository.findApiKey(id);
    if (
      current &&
      current.organization_id === organizationId &&
      current.kind === "cloud_token" &&
      current.revoked_at === null
    ) {
      const token = toCloudToken(current);
      const same =
        (changes.description ?? token.description) === token.description &&
        (changes.restricted ?? token.restricted) === token.restricted &&
        (changes.billingAccountId ?? token.billing_account_id) === token.billing_account_id;
      if (same) return { outcome: "updated", token };
    }
    const row = await this.repository.updateLiveApiKey(organizationId, "cloud_token", id, {
      ...(changes.description !== undefined ? { description: changes.description } : {}),
      ...(changes.restricted !== undefined ? { restricted: changes.restricted } : {}),
      ...(changes.billingAccountId !== undefined ? { billing_account_id: changes.billingAccountId } : {}),
      updated_at: nowIso(this.clock),
    });
    // `restricted` and the billing account are part of a cached AuthContext.
    if (!row) return { outcome: "not_found" };
    await this.keyChanged();
    return { outcome: "updated", token: toCloudToken(row) };
  }

  /** Revokes the token: the next request presenting it, on any node, is refused (caches are told first). */
  async deleteCloudToken(organizationId: string, id: number): Promise<{ outcome: "revoked" | "not_found" }> {
    const revoked = await this.repository.revokeOrganizationApiKey(
      organizationId,
      "cloud_token",
      id,
      nowIso(this.clock),
    );
    if (!revoked) return { outcome: "not_found" };
    await this.keyChanged();
    return { outcome: "revoked" };
  }

  private keyRow(
    organizationId: string,
    userId: number,
    name: string,
    secret: string,
    readOnly: boolean,
    now: string,
  ) {
    return {
      organization_id: organizationId,
      user_id: userId,
      kind: "organization" as const,
      name,
      description: "",
      prefix: displayPrefix(secret),
      key_hash: hashSecret(secret),
      read_only: readOnly,
      restricted: false,
      billing_account_id: null,
      consumer_id: randomUUID(),
      created_at: now,
      updated_at: now,
      expires_at: null,
    };
  }
}

function toCloudToken(row: {
  id: number;
  billing_account_id: number | null;
  user_id: number;
  consumer_id: string;
  description: string;
  restricted: boolean | number;
  created_at: string;
  updated_at: string;
}): CloudTokenRecord {
  // A cloud token is created charged to an account (insertApiKeyChargedTo) and accounts are never
  // deleted, so SPEC.md's integer `billing_account_id` is always there.
  if (row.billing_account_id === null) throw new Error(`cloud token ${row.id} has no billing account`);
  return {
    id: row.id,
    billing_account_id: row.billing_account_id,
    user_id: row.user_id,
    consumer_id: row.consumer_id,
    description: row.description,
    restricted: readBool(row.restricted),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}
