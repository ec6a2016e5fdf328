import { randomBytes, randomUUID } from "node:crypto";
import { type Clock, nowIso } from "../clock.ts";
import { type Config, publicOrigin } from "../config.ts";
import type { AuthContext, IdentityService } from "../identity/service.ts";
import { opens, type SecretBox } from "../secret-box.ts";
import { readBool } from "../store/codec.ts";
import type { Executor, Transact } from "../store/transactions.ts";
import { DELETED, type Deleted, type Forbidden, type NotFound, notFound } from "./outcome.ts";
import type { CloudRepository } from "./repository.ts";
import type { S3KeyView, S3UserView } from "./schemas.ts";

export const S3_MAX_BUCKETS = 1000;

const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const SECRET_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

export type S3UserOutcome = { outcome: "found"; user: S3UserView } | Forbidden;
export type DeleteS3KeyOutcome = Deleted | NotFound;

/** Unbiased random text from an alphabet of at most 256 characters. */
function randomText(alphabet: string, length: number): string {
  let out = "";
  const limit = 256 - (256 % alphabet.length);
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < limit && out.length < length) out += alphabet[byte % alphabet.length];
    }
  }
  return out;
}

/**
 * The organization's object-storage user and its key pairs. Write-capable keys create the user on
 * first use; read-only keys create nothing and never see a secret (docs/security.md).
 */
export class ObjectStorageService {
  constructor(
    private readonly repository: CloudRepository,
    private readonly transact: Transact,
    private readonly identity: IdentityService,
    private readonly secrets: SecretBox,
    private readonly config: Config,
    private readonly clock: Clock,
  ) {}

  /** Whether the key pair stored last opens with this node's secret key (true when there is none). */
  async storedSecretsOpen(): Promise<boolean> {
    const key = await this.repository.newestS3Key();
    return key === undefined || opens(() => this.secrets.open(key.secret_encrypted, key.access_key));
  }

  /**
   * The user with its key pairs, created with one pair on first use; when every pair has been
   * deleted, a new one is generated (SPEC.md: "when the user or keys do not exist they are
   * generated"). A read-only key sees the user as it is, and one that does not exist is forbidden to it.
   */
  async user(auth: AuthContext): Promise<S3UserOutcome> {
    if (auth.readOnly) {
      const existing = await this.view(this.repository.db, auth);
      if (existing) return { outcome: "found", user: existing };
      return { outcome: "forbidden", message: "A read-only key cannot create the object-storage user" };
    }
    // Read before the transaction: on SQLite a query outside it would wait for its connection.
    const displayName = await this.displayName(auth.organizationId);
    const user = await this.transact(async (trx) => {
      await this.ensureUser(trx, auth.organizationId, displayName);
      // Locked, so that concurrent calls on a user without keys generate one pair, not one each.
      await this.repository.findS3User(trx, auth.organizationId, true);
      if ((await this.repository.listS3Keys(trx, auth.organizationId)).length === 0) {
        await this.insertKey(trx, auth.organizationId, nowIso(this.clock));
      }
      return this.view(trx, auth);
    });
    if (!user) throw new Error("object-storage user vanished");
    return { outcome: "found", user };
  }

  /** The key pairs; a write-capable key creates the user on first use, a read-only key creates nothing. */
  async keys(auth: AuthContext): Promise<S3KeyView[]> {
    if (auth.readOnly) return this.keyViews(this.repository.db, auth);
    // Read before the transaction: on SQLite a query outside it would wait for its connection.
    const displayName = await this.displayName(auth.organizationId);
    return this.transact(async (trx) => {
      await this.ensureUser(trx, auth.organizationId, displayName);
      return this.keyViews(trx, auth);
    });
  }

  /** One more key pair (the first call also creates the user and its first pair); returns all keys. */
  async createKey(auth: AuthContext): Promise<S3KeyView[]> {
    const displayName = await this.displayName(auth.organizationId);
    return this.transact(async (trx) => {
      await this.ensureUser(trx, auth.organizationId, displayName);
      await this.insertKey(trx, auth.organizationId, nowIso(this.clock));
      return this.keyViews(trx, auth);
    });
  }

  async deleteKey(auth: AuthContext, accessKey: string): Promise<DeleteS3KeyOutcome> {
    const deleted = await this.transact((trx) =>
      this.repository.deleteS3Key(trx, auth.organizationId, accessKey),
    );
    return deleted ? DELETED : notFound("S3 key");
  }

  /**
   * The S3 endpoint, under the public origin (`CUMULO_PUBLIC_URL`, else `http://HOST:PORT`): no longer
   * under the request's own `Host`, which a client or an intermediary chooses (QA of 4 December).
   */
  endpoint(listeningPort: number | undefined): string {
    // The port the request reached: PORT may be 0, a port chosen when the server started.
    return `${publicOrigin({ ...this.config, port: listeningPort ?? this.config.port })}/s3`;
  }

  /** Creates the user and its first key pair unless it exists. */
  private async ensureUser(executor: Executor, organizationId: string, displayName: string): Promise<void> {
    if (await this.repository.findS3User(executor, organizationId)) return;
    const now = nowIso(this.clock);
    // Of two concurrent first calls, one inserts; the other waits for it and inserts nothing.
    const created = await this.repository.insertS3UserIfAbsent(executor, {
      organization_id: organizationId,
      user_id: randomUUID(),
      display_name: displayName,
      email: "",
      max_buckets: S3_MAX_BUCKETS,
      suspended: false,
      created_at: now,
    });
    if (created) await this.insertKey(executor, organizationId, now);
  }

  private async displayName(organizationId: string): Promise<string> {
    return (await this.identity.organizationName(organizationId)) ?? organizationId;
  }

  private async insertKey(executor: Executor, organizationId: string, now: string) {
    const accessKey = randomText(ALPHANUMERIC, 20);
    await this.repository.insertS3Key(executor, {
      access_key: accessKey,
      organization_id: organizationId,
      secret_encrypted: this.secrets.seal(randomText(SECRET_ALPHABET, 40), accessKey),
      created_at: now,
    });
  }

  private async keyViews(executor: Executor, auth: AuthContext): Promise<S3KeyView[]> {
    const user = await this.repository.findS3User(executor, auth.organizationId);
    if (!user) return [];
    const keys = await this.repository.listS3Keys(executor, auth.organizationId);
    return keys.map((key) => ({
      accessKey: key.access_key,
      secretKey: auth.readOnly ? null : this.secrets.open(key.secret_encrypted, key.access_key),
      userId: user.user_id,
    }));
  }

  private async view(executor: Executor, auth: AuthContext): Promise<S3UserView | undefined> {
    const user = await this.repository.findS3User(executor, auth.organizationId);
    if (!user) return undefined;
    return {
      userId: user.user_id,
      displayName: user.display_name,
      email: user.email,
      maxBuckets: user.max_buckets,
      suspended: readBool(user.suspended),
      s3Credentials: await this.keyViews(executor, auth),
    };
  }
}
