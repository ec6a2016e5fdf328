import { type Kysely, type Selectable, sql } from "kysely";
import type { DialectName } from "../store/database.ts";
import { columnsOf, PreparedQuery, type ValueOf, valuesOf } from "../store/prepared.ts";
import type { Database } from "../store/tables.ts";
import type { Executor } from "../store/transactions.ts";
import type { ApiKeyKind, ApiKeyTable, BillingAccountTable } from "./tables.ts";

export interface NewApiKeyRow {
  organization_id: string;
  user_id: number;
  kind: ApiKeyKind;
  name: string;
  description: string;
  prefix: string;
  key_hash: string;
  read_only: boolean;
  restricted: boolean;
  billing_account_id: number | null;
  consumer_id: string;
  created_at: string;
  updated_at: string;
  expires_at: string | null;
}

export type ChargedApiKeyRow = NewApiKeyRow & { billing_account_id: number };

interface BillingAccountKey {
  organizationId: string;
  id: number;
}

export class IdentityRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
  ) {}

  /**
   * Runs `work` while no other node runs its own: nodes started together on an empty PostgreSQL
   * store would each find no default organization and make one (or insert the same bootstrap key
   * twice, and all but one stop). A session lock on a connection of its own; `work` uses the pool.
   * SQLite stores have one server.
   */
  async whileBootstrapping<T>(work: () => Promise<T>): Promise<T> {
    if (this.dialect !== "postgres") return work();
    return this.db.connection().execute(async (connection) => {
      await sql`select pg_advisory_lock(hashtext('cumulo bootstrap'))`.execute(connection);
      try {
        return await work();
      } finally {
        await sql`select pg_advisory_unlock(hashtext('cumulo bootstrap'))`.execute(connection);
      }
    });
  }

  // Built and compiled once: creating a cloud token runs these, and building them cost more than
  // SQLite takes to run them (docs/performance.md, session 7). A row's columns are its shape.
  readonly #insertApiKey = new PreparedQuery<NewApiKeyRow, Selectable<ApiKeyTable>>(
    (value: ValueOf<NewApiKeyRow>, row) =>
      this.db
        .insertInto("api_keys")
        .values(valuesOf(value, row, (values) => values))
        .returningAll(),
    (row) => columnsOf(row).join(),
  );
  /** A key charged to billing account `billing_account_id`, inserted only if that account is the organization's. */
  readonly #insertApiKeyChargedTo = new PreparedQuery<ChargedApiKeyRow, Selectable<ApiKeyTable>>(
    (value: ValueOf<ChargedApiKeyRow>) => ({
      compile: () =>
        sql<Selectable<ApiKeyTable>>`
          insert into api_keys (organization_id, user_id, kind, name, description, prefix, key_hash, read_only,
            restricted, billing_account_id, consumer_id, created_at, updated_at, expires_at)
          select ${value((row) => row.organization_id)}, ${value((row) => row.user_id)}, ${value((row) => row.kind)},
            ${value((row) => row.name)}, ${value((row) => row.description)}, ${value((row) => row.prefix)},
            ${value((row) => row.key_hash)}, ${value((row) => row.read_only)}, ${value((row) => row.restricted)}, id,
            ${value((row) => row.consumer_id)}, ${value((row) => row.created_at)}, ${value((row) => row.updated_at)},
            ${value((row) => row.expires_at)}
          from billing_accounts
          where organization_id = ${value((row) => row.organization_id)} and id = ${value((row) => row.billing_account_id)}
          returning *`.compile(this.db),
    }),
  );
  readonly #billingAccount = new PreparedQuery<BillingAccountKey, Selectable<BillingAccountTable>>(
    (value: ValueOf<BillingAccountKey>) =>
      this.db
        .selectFrom("billing_accounts")
        .selectAll()
        .where(
          "organization_id",
          "=",
          value((key) => key.organizationId),
        )
        .where(
          "id",
          "=",
          value((key) => key.id),
        ),
  );
  readonly #defaultBillingAccount = new PreparedQuery<string, Selectable<BillingAccountTable>>(
    (value: ValueOf<string>) =>
      this.db
        .selectFrom("billing_accounts")
        .selectAll()
        .where(
          "organization_id",
          "=",
          value((organizationId) => organizationId),
        )
        .orderBy("is_default", "desc")
        .orderBy("id"),
  );

  async insertOrganization(executor: Executor, row: { id: string; name: string; created_at: string }) {
    await executor
      .insertInto("organizations")
      .values({ ...row, updated_at: row.created_at })
      .execute();
  }

  insertUser(
    executor: Executor,
    row: {
      uuid: string;
      organization_id: string;
      name: string;
      email: string;
      created_at: string;
      password_hash?: string | null;
      read_only?: boolean;
    },
  ) {
    return executor.insertInto("users").values(row).returningAll().executeTakeFirstOrThrow();
  }

  insertBillingAccount(
    executor: Executor,
    row: { organization_id: string; display_name: string; is_default: boolean; created_at: string },
  ) {
    return executor.insertInto("billing_accounts").values(row).returningAll().executeTakeFirstOrThrow();
  }

  async insertApiKey(row: NewApiKeyRow, executor: Executor = this.db) {
    const inserted = await this.#insertApiKey.first(executor, row);
    if (!inserted) throw new Error("an INSERT ... RETURNING returned no row");
    return inserted;
  }

  /**
   * The key, if its billing account is its organization's; else nothing is inserted. One statement
   * where a read of the account came first: on SQLite one lock round trip fewer, on PostgreSQL one
   * query fewer (docs/performance.md, session 25).
   */
  insertApiKeyChargedTo(row: ChargedApiKeyRow): Promise<Selectable<ApiKeyTable> | undefined> {
    return this.#insertApiKeyChargedTo.first(this.db, row);
  }

  listOrganizations() {
    return this.db.selectFrom("organizations").selectAll().orderBy("created_at").orderBy("id").execute();
  }

  /** The first organization of this name, as `listOrganizations` orders them. */
  findOrganizationByName(executor: Executor, name: string) {
    return executor
      .selectFrom("organizations")
      .selectAll()
      .where("name", "=", name)
      .orderBy("created_at")
      .orderBy("id")
      .executeTakeFirst();
  }

  /**
   * The user's bootstrap key while it is valid: the admin key with that hash, else the first admin
   * key the user ever had (the one the first start generated). A revoked one is none: a key made
   * since does not take its place (QA of 6 December: a reset kept it as the operator's key).
   */
  async findBootstrapKey(executor: Executor, userId: number, keyHash: string | undefined) {
    let query = executor
      .selectFrom("api_keys")
      .select(["id", "revoked_at"])
      .where("user_id", "=", userId)
      .where("kind", "=", "organization")
      .where("read_only", "=", false);
    if (keyHash !== undefined) query = query.where("key_hash", "=", keyHash).where("revoked_at", "is", null);
    const key = await query.orderBy("id").executeTakeFirst();
    return key?.revoked_at === null ? { id: key.id } : undefined;
  }

  findOrganization(id: string) {
    return this.db.selectFrom("organizations").selectAll().where("id", "=", id).executeTakeFirst();
  }

  countOrganizations() {
    return this.db
      .selectFrom("organizations")
      .select((eb) => eb.fn.countAll<number>().as("count"))
      .executeTakeFirstOrThrow()
      .then((row) => Number(row.count));
  }

  findFirstUser(executor: Executor, organizationId: string) {
    return executor
      .selectFrom("users")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .orderBy("id")
      .executeTakeFirst();
  }

  findDefaultBillingAccount(executor: Executor, organizationId: string) {
    return this.#defaultBillingAccount.first(executor, organizationId);
  }

  listBillingAccounts(organizationId: string) {
    return this.db
      .selectFrom("billing_accounts")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .orderBy("id")
      .execute();
  }

  findBillingAccount(organizationId: string, id: number) {
    return this.#billingAccount.first(this.db, { organizationId, id });
  }

  /** The live key with this hash, with the user it acts as. */
  findActiveKeyByHash(keyHash: string, now: string) {
    return this.db
      .selectFrom("api_keys")
      .innerJoin("users", "users.id", "api_keys.user_id")
      .select([
        "api_keys.id",
        "api_keys.organization_id",
        "api_keys.user_id",
        "api_keys.kind",
        "api_keys.read_only",
        "api_keys.restricted",
        "api_keys.billing_account_id",
        "api_keys.expires_at",
        "api_keys.last_used_at",
        "users.uuid as user_uuid",
      ])
      .where("api_keys.key_hash", "=", keyHash)
      .where("api_keys.revoked_at", "is", null)
      .where((eb) => eb.or([eb("api_keys.expires_at", "is", null), eb("api_keys.expires_at", ">", now)]))
      .executeTakeFirst();
  }

  /** Whether the key is live at `now` (neither revoked nor expired). */
  async isLiveKey(id: number, now: string): Promise<boolean> {
    const row = await this.db
      .selectFrom("api_keys")
      .select("id")
      .where("id", "=", id)
      .where("revoked_at", "is", null)
      .where((eb) => eb.or([eb("expires_at", "is", null), eb("expires_at", ">", now)]))
      .executeTakeFirst();
    return row !== undefined;
  }

  async touchApiKey(id: number, now: string): Promise<void> {
    await this.db.updateTable("api_keys").set({ last_used_at: now }).where("id", "=", id).execute();
  }

  /** The session with this token hash, live at `now` (not idle since `idleSince`), with its user and organization. */
  findLiveSessions(tokenHashes: readonly string[], now: string, idleSince: string) {
    // Padded to a power of two (repeating the first hash): a few statement shapes, not one per count
    // of cookies a request can carry, each of which PostgreSQL would keep prepared.
    const padded = [...tokenHashes];
    while (padded.length & (padded.length - 1)) padded.push(tokenHashes[0] as string);
    return this.db
      .selectFrom("console_sessions")
      .innerJoin("users", "users.id", "console_sessions.user_id")
      .innerJoin("organizations", "organizations.id", "users.organization_id")
      .select([
        "console_sessions.id",
        "console_sessions.token_hash",
        "console_sessions.last_seen_at",
        "users.id as user_id",
        "users.uuid as user_uuid",
        "users.email",
        "users.read_only",
        "organizations.id as organization_id",
        "organizations.name as organization_name",
      ])
      .where("console_sessions.token_hash", "in", padded)
      .where("console_sessions.expires_at", ">", now)
      .where("console_sessions.last_seen_at", ">", idleSince)
      .execute();
  }

  async deleteSessions(tokenHashes: readonly string[]): Promise<void> {
    await this.db.deleteFrom("console_sessions").where("token_hash", "in", tokenHashes).execute();
  }

  async touchSession(id: number, now: string): Promise<void> {
    await this.db.updateTable("console_sessions").set({ last_seen_at: now }).where("id", "=", id).execute();
  }

  findKeyByHash(keyHash: string) {
    return this.db.selectFrom("api_keys").selectAll().where("key_hash", "=", keyHash).executeTakeFirst();
  }

  listApiKeys(organizationId: string, kind: ApiKeyKind) {
    return this.db
      .selectFrom("api_keys")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .where("kind", "=", kind)
      .where("revoked_at", "is", null)
      .orderBy("id")
      .execute();
  }

  findApiKey(id: number) {
    return this.db.selectFrom("api_keys").selectAll().where("id", "=", id).executeTakeFirst();
  }

  async revokeApiKey(id: number, now: string): Promise<boolean> {
    const result = await this.db
      .updateTable("api_keys")
      .set({ revoked_at: now, updated_at: now })
      .where("id", "=", id)
      .where("revoked_at", "is", null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Makes a revoked key valid again (the operator's bootstrap key, named again by the setting). */
  async restoreApiKey(id: number, now: string): Promise<void> {
    await this.db
      .updateTable("api_keys")
      .set({ revoked_at: null, updated_at: now })
      .where("id", "=", id)
      .execute();
  }

  defaultBillingAccount(organizationId: string) {
    return this.findDefaultBillingAccount(this.db, organizationId);
  }

  /** Changes a live (not revoked) key of this organization and kind, in one statement: the row as changed. */
  updateLiveApiKey(
    organizationId: string,
    kind: ApiKeyKind,
    id: number,
    changes: { description?: string; restricted?: boolean; billing_account_id?: number; updated_at: string },
  ) {
    return this.db
      .updateTable("api_keys")
      .set(changes)
      .where("organization_id", "=", organizationId)
      .where("kind", "=", kind)
      .where("id", "=", id)
      .where("revoked_at", "is", null)
      .returningAll()
      .executeTakeFirst();
  }

  /** Revokes a key only if it belongs to the organization and is of that kind. */
  async revokeOrganizationApiKey(
    organizationId: string,
    kind: ApiKeyKind,
    id: number,
    now: string,
  ): Promise<boolean> {
    const result = await this.db
      .updateTable("api_keys")
      .set({ revoked_at: now, updated_at: now })
      .where("organization_id", "=", organizationId)
      .where("kind", "=", kind)
      .where("id", "=", id)
      .where("revoked_at", "is", null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }
}
