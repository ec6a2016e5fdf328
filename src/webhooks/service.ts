import { randomUUID } from "node:crypto";
import { type Clock, laterBy, nowIso } from "../clock.ts";
import type { FieldError } from "../http/errors.ts";
import type { Page } from "../http/pagination.ts";
import { credentialsIn, headerCredentialsIn } from "../http/read-only-view.ts";
import { withOffset } from "../http/time.ts";
import type { LibraryRepository } from "../media/repository.ts";
import { checkUrlTarget } from "../net/address-guard.ts";
import { opens } from "../secret-box.ts";
import { readBool, readJson, writeJson } from "../store/codec.ts";
import type { Transact } from "../store/transactions.ts";
import type { DeliveryRepository } from "./delivery-repository.ts";
import type { WebhookEmitter } from "./emitter.ts";
import type { AttemptFilters, EndpointRow, WebhookRepository } from "./repository.ts";
import type { RetryPolicy } from "./schedule.ts";
import {
  type CreateEndpointBody,
  ENDPOINT_URL_WORDS,
  type QueuedDelivery,
  type UpdateEndpointBody,
  type WebhookDelivery,
  type WebhookEndpointWithSecret,
} from "./schemas.ts";
import type { EndpointHeaders, SealedHeaders } from "./sealed-headers.ts";
import { PLAIN_PREFIX, type SigningSecrets } from "./secrets.ts";

type NotFound = { outcome: "not_found" };

export type EndpointOutcome =
  | { outcome: "created" | "found" | "updated" | "rotated"; endpoint: WebhookEndpointWithSecret }
  | NotFound
  | { outcome: "invalid"; errors: FieldError[] }
  /** The library has as many endpoints as one may have (`limit`, CUMULO_WEBHOOK_ENDPOINTS_MAX). */
  | { outcome: "limit_reached"; limit: number };
export type QueuedOutcome = { outcome: "queued"; delivery: QueuedDelivery } | NotFound;
export type ListOutcome<T> = { outcome: "listed"; rows: T[]; total: number } | NotFound;
/** Deliveries, with the endpoint's secret values their receiver's answers may repeat (`secretValues`). */
export type DeliveriesOutcome =
  | { outcome: "listed"; rows: WebhookDelivery[]; total: number; secretValues: string[] }
  | NotFound;

/** The endpoint as answered at `now`, its secret and headers opened (the previous secret is never answered). */
function toEndpoint(
  row: EndpointRow,
  secrets: SigningSecrets,
  headers: SealedHeaders,
  now: Date,
): WebhookEndpointWithSecret {
  const previousExpiresAt = row.previous_secret_expires_at;
  return {
    id: row.id,
    library_id: row.library_id,
    organization_id: row.organization_id,
    name: row.name,
    url: row.url,
    events: readJson<string[]>(row.events) ?? [],
    headers: headers.open(row.id, row.headers),
    retry_policy: readJson<RetryPolicy>(row.retry_policy),
    secret: secrets.open(row.id, row.secret),
    // Only while an overlap runs: without one, the endpoint is answered in the contract's fields alone.
    ...(previousExpiresAt !== null && Date.parse(previousExpiresAt) > now.getTime()
      ? { previous_secret_expires_at: withOffset(previousExpiresAt) }
      : {}),
    is_active: readBool(row.is_active),
    created_by: row.created_by,
    updated_by: row.updated_by,
    created_at: withOffset(row.created_at),
    updated_at: withOffset(row.updated_at),
  };
}

/**
 * What of an endpoint a receiver's answer may repeat and a read-only key must not read there: the
 * credentials of its custom headers and its URL (`headerCredentialsIn`, `credentialsIn`) and its
 * signing secrets (the previous one too, as long as it is kept; also without `whsec_`)
 * (docs/security.md, "Read-only keys and secrets").
 */
function secretValuesOf(endpoint: WebhookEndpointWithSecret, previousSecret: string | undefined): string[] {
  const signing = [endpoint.secret, previousSecret].flatMap((secret) =>
    secret === undefined ? [] : [secret, secret.replace(PLAIN_PREFIX, "")],
  );
  return [...headerCredentialsIn(endpoint.headers), ...signing, ...credentialsIn(endpoint.url)];
}

interface Actor {
  organizationId: string;
  userUuid: string;
}

/** Webhook endpoints of a library, their delivery history, test sends and manual retries. */
/**
 * A retry policy as stored, its fields in one order: an update that repeats it with its fields in
 * another order changes nothing (SQLite compares the stored text; PostgreSQL's jsonb sorts them).
 */
const policyText = (policy: RetryPolicy | null) =>
  writeJson(
    policy && {
      max_attempts: policy.max_attempts,
      initial_delay_s: policy.initial_delay_s,
      multiplier: policy.multiplier,
      max_delay_s: policy.max_delay_s,
    },
  );

export class WebhookService {
  constructor(
    private readonly transact: Transact,
    private readonly repository: WebhookRepository,
    private readonly deliveries: DeliveryRepository,
    private readonly emitter: WebhookEmitter,
    private readonly libraries: LibraryRepository,
    private readonly clock: Clock,
    private readonly secrets: SigningSecrets,
    private readonly headers: SealedHeaders,
    private readonly options: {
      allowPrivate: boolean;
      /** Endpoints one library may have (CUMULO_WEBHOOK_ENDPOINTS_MAX). */
      maxEndpointsPerLibrary: number;
    },
  ) {}

  async #libraryExists(organizationId: string, libraryId: string): Promise<boolean> {
    return (await this.libraries.findLibrary(organizationId, libraryId)) !== undefined;
  }

  /**
   * Field errors of an endpoint's URL (its form is checked by the schema too): http(s), resolved and
   * checked (SSRF). Anything but a string is left to the schema.
   */
  async checkUrl(url: unknown): Promise<FieldError[]> {
    if (typeof url !== "string") return [];
    // A user name or password in the URL is never sent (no Authorization is made from it), and a
    // read-only key would see it: the receiver's credential belongs in `headers`, which it cannot read.
    const parsed = URL.canParse(url) ? new URL(url) : undefined;
    if (parsed && (parsed.username !== "" || parsed.password !== "")) {
      const message =
        "The url field must not contain a user name or password; send the credential in headers (Authorization).";
      return [{ field: "url", code: "validation_format", message }];
    }
    const target = await checkUrlTarget(url, this.options.allowPrivate);
    if (target.outcome === "public") return [];
    const message =
      target.outcome === "not_http"
        ? `The url field has an invalid format. It must be ${ENDPOINT_URL_WORDS}.`
        : `The url field must reach a public address: ${target.reason}.`;
    return [{ field: "url", code: "validation_format", message }];
  }

  async create(actor: Actor, libraryId: string, body: CreateEndpointBody): Promise<EndpointOutcome> {
    if (!(await this.#libraryExists(actor.organizationId, libraryId))) return { outcome: "not_found" };
    const errors = await this.checkUrl(body.url);
    if (errors.length > 0) return { outcome: "invalid", errors };
    const now = nowIso(this.clock);
    const id = randomUUID();
    const limit = this.options.maxEndpointsPerLibrary;
    const made = await this.transact(async (trx) => {
      // Counted under the library row's lock (PostgreSQL; SQLite has one writer), so creates at the
      // same moment take turns and the last ones find the library full.
      if (!(await this.libraries.lockLibrary(trx, actor.organizationId, libraryId))) return "not_found";
      if ((await this.repository.countEndpoints(trx, libraryId)) >= limit) return "limit_reached";
      await this.repository.insertEndpoint(trx, {
        id,
        organization_id: actor.organizationId,
        library_id: libraryId,
        name: body.name,
        url: body.url,
        events: JSON.stringify([...new Set(body.events)]),
        headers: this.headers.seal(id, body.headers ?? null),
        retry_policy: policyText(body.retry_policy ?? null),
        secret: this.secrets.generateSealed(id),
        is_active: body.is_active ?? true,
        created_by: actor.userUuid,
        updated_by: actor.userUuid,
        created_at: now,
        updated_at: now,
      });
      return "created";
    });
    if (made === "limit_reached") return { outcome: "limit_reached", limit };
    if (made === "not_found") return { outcome: "not_found" };
    return this.#read("created", actor.organizationId, libraryId, id);
  }

  get(organizationId: string, libraryId: string, id: string): Promise<EndpointOutcome> {
    return this.#read("found", organizationId, libraryId, id);
  }

  async #read(
    outcome: "created" | "found" | "updated" | "rotated",
    organizationId: string,
    libraryId: string,
    id: string,
  ): Promise<EndpointOutcome> {
    const row = await this.repository.findEndpoint(organizationId, libraryId, id);
    return row
      ? { outcome, endpoint: toEndpoint(row, this.secrets, this.headers, this.clock.now()) }
      : { outcome: "not_found" };
  }

  async list(
    organizationId: string,
    libraryId: string,
    page: Page,
  ): Promise<ListOutcome<WebhookEndpointWithSecret>> {
    if (!(await this.#libraryExists(organizationId, libraryId))) return { outcome: "not_found" };
    const { rows, total } = await this.repository.listEndpoints(organizationId, libraryId, page);
    const now = this.clock.now();
    return {
      outcome: "listed",
      rows: rows.map((row) => toEndpoint(row, this.secrets, this.headers, now)),
      total,
    };
  }

  async update(
    actor: Actor,
    libraryId: string,
    id: string,
    body: UpdateEndpointBody,
  ): Promise<EndpointOutcome> {
    const current = await this.repository.findEndpoint(actor.organizationId, libraryId, id);
    if (!current) return { outcome: "not_found" };
    // The answer shows the secret: one this node cannot open (another secret key) is refused before
    // anything is written, not after (503 with the change made).
    this.secrets.open(current.id, current.secret);
    if (body.headers === undefined) this.headers.open(current.id, current.headers);
    const errors = await this.checkUrl(body.url);
    if (errors.length > 0) return { outcome: "invalid", errors };
    const found = await this.transact(async (trx) => {
      const row = await this.repository.findEndpoint(actor.organizationId, libraryId, id, trx);
      if (!row) return false;
      await this.repository.updateEndpoint(trx, actor.organizationId, id, {
        ...(body.name !== undefined ? { name: body.name } : {}),
        ...(body.url !== undefined ? { url: body.url } : {}),
        ...(body.events !== undefined ? { events: JSON.stringify([...new Set(body.events)]) } : {}),
        ...(body.headers !== undefined ? { headers: this.#headersToStore(row, body.headers) } : {}),
        ...(body.retry_policy !== undefined ? { retry_policy: policyText(body.retry_policy) } : {}),
        ...(body.is_active !== undefined ? { is_active: body.is_active } : {}),
        updated_by: actor.userUuid,
        updated_at: nowIso(this.clock),
      });
      return true;
    });
    if (!found) return { outcome: "not_found" };
    this.emitter.endpointsChanged([id]);
    return this.#read("updated", actor.organizationId, libraryId, id);
  }

  /**
   * The stored form of the headers an update gives: the stored text itself when they are the ones
   * stored, so that an update repeating them changes nothing (`updated_at` stays), as for every
   * other field; sealing them again would give another text each time.
   */
  #headersToStore(row: EndpointRow, given: EndpointHeaders | null): string | null {
    let stored: EndpointHeaders | null | undefined;
    try {
      stored = this.headers.open(row.id, row.headers);
    } catch {
      stored = undefined;
    }
    return stored !== undefined && JSON.stringify(stored) === JSON.stringify(given)
      ? row.headers
      : this.headers.seal(row.id, given);
  }

  /**
   * Replaces the endpoint's secret. With `previousSecretExpiresInS` > 0 the replaced one keeps signing
   * deliveries (after the new one) for that long; a secret kept from an earlier rotation is dropped
   * either way, so at most two ever sign.
   */
  async rotateSecret(
    actor: Actor,
    libraryId: string,
    id: string,
    previousSecretExpiresInS: number,
  ): Promise<EndpointOutcome> {
    const found = await this.transact(async (trx) => {
      // Locked, so of two rotations at once the later keeps the earlier's new secret as the previous one.
      const row = await this.repository.findEndpoint(actor.organizationId, libraryId, id, trx, "update");
      if (!row) return false;
      const now = this.clock.now();
      // A secret this node cannot open (the key it was sealed with is lost) could sign nothing in
      // the overlap: the rotation is the way out, so the new secret signs alone.
      const overlaps = previousSecretExpiresInS > 0 && opens(() => this.secrets.open(id, row.secret));
      // Custom headers sealed with that lost key can be neither sent nor answered: they are dropped,
      // to be set again (PATCH), rather than making the endpoint unreadable for good.
      const headersLost = !opens(() => this.headers.open(id, row.headers));
      await this.repository.updateEndpoint(trx, actor.organizationId, id, {
        secret: this.secrets.generateSealed(id),
        ...(headersLost ? { headers: null } : {}),
        previous_secret: overlaps ? this.secrets.sealedForm(id, row.secret) : null,
        previous_secret_expires_at: overlaps
          ? laterBy(now, previousSecretExpiresInS * 1000).toISOString()
          : null,
        updated_by: actor.userUuid,
        updated_at: now.toISOString(),
      });
      return true;
    });
    if (!found) return { outcome: "not_found" };
    // The replaced secret stops signing at once: no attempt held with it goes out.
    this.emitter.endpointsChanged([id]);
    return this.#read("rotated", actor.organizationId, libraryId, id);
  }

  async delete(
    organizationId: string,
    libraryId: string,
    id: string,
  ): Promise<{ outcome: "deleted" | "not_found" }> {
    const deleted = await this.transact(async (trx) => {
      if (!(await this.repository.findEndpoint(organizationId, libraryId, id, trx, "delete"))) return false;
      return this.repository.deleteEndpoint(trx, organizationId, id);
    });
    if (deleted) this.emitter.endpointsChanged([id]);
    return { outcome: deleted ? "deleted" : "not_found" };
  }

  /**
   * Seals the signing secrets and custom headers still kept in plain text (written by a version
   * before sealing, or by an older node during a rolling upgrade); run at each start, as a migration
   * cannot read the secret key. A row changed meanwhile keeps its new value. Returns how many values
   * it sealed.
   */
  async sealPlainSecrets(): Promise<number> {
    let sealed = 0;
    for (const { id, secret } of await this.repository.listSecretsStartingWith(PLAIN_PREFIX)) {
      if (!this.secrets.isPlain(secret)) continue;
      if (await this.repository.replaceSecret(id, secret, this.secrets.seal(id, secret))) sealed++;
    }
    for (const { id, headers } of await this.repository.listPlainHeaders()) {
      if (!this.headers.isPlain(headers)) continue;
      const opened = this.headers.open(id, headers);
      if (await this.repository.replaceHeaders(id, headers, this.headers.seal(id, opened) ?? headers))
        sealed++;
    }
    return sealed;
  }

  /** Whether the endpoint secret sealed last opens with this node's secret key (true when there is none). */
  async storedSecretsOpen(): Promise<boolean> {
    const row = await this.repository.newestSealedSecret(PLAIN_PREFIX);
    return row === undefined || opens(() => this.secrets.open(row.id, row.secret));
  }

  /** Queues one `test` notification to this endpoint only, whatever its events and is_active. */
  async sendTest(organizationId: string, libraryId: string, id: string): Promise<QueuedOutcome> {
    const queued = await this.transact(async (trx) => {
      if (!(await this.repository.findEndpoint(organizationId, libraryId, id, trx, "refer")))
        return undefined;
      await this.emitter.emit(trx, { event: "test", organizationId, libraryId, endpointId: id });
      const row = await this.repository.latestQueued(trx, id, "test");
      return (
        row && {
          id: row.id,
          webhook_id: row.message_id,
          webhook_endpoint_id: id,
          event: "test",
          attempt: row.attempt,
        }
      );
    });
    return this.#queued(queued);
  }

  /** A delivery queued by the committed transaction: the dispatcher is woken for it. */
  #queued(delivery: QueuedDelivery | undefined): QueuedOutcome {
    if (!delivery) return { outcome: "not_found" };
    this.emitter.notify();
    return { outcome: "queued", delivery };
  }

  async listDeliveries(
    organizationId: string,
    libraryId: string,
    endpointId: string,
    filters: AttemptFilters,
    page: Page,
  ): Promise<DeliveriesOutcome> {
    const endpointRow = await this.repository.findEndpoint(organizationId, libraryId, endpointId);
    if (!endpointRow) return { outcome: "not_found" };
    const endpoint = toEndpoint(endpointRow, this.secrets, this.headers, this.clock.now());
    const previousSecret =
      endpointRow.previous_secret === null
        ? undefined
        : this.secrets.openPrevious(endpointId, endpointRow.previous_secret);
    const { rows, total } = await this.repository.listAttempts(organizationId, endpointId, filters, page);
    return {
      outcome: "listed",
      total,
      secretValues: secretValuesOf(endpoint, previousSecret),
      rows: rows.map((row) => ({
        id: row.id,
        created_at: withOffset(row.created_at),
        ...(row.next_retry_at ? { next_retry_at: withOffset(row.next_retry_at) } : {}),
        webhook_endpoint_id: row.endpoint_id,
        webhook_endpoint: endpoint,
        video_id: row.video_id,
        library_id: row.library_id,
        payload: JSON.parse(row.body),
        event: row.event,
        response_status: row.response_status ?? 0,
        response_body: row.response_body ?? "",
        ...(row.error ? { error: row.error } : {}),
        attempt: row.attempt,
        duration_ms: row.duration_ms ?? 0,
        success: readBool(row.success),
      })),
    };
  }

  /** One immediate extra attempt of the delivery's message, signed with the endpoint's current secret. */
  async retryDelivery(
    organizationId: string,
    libraryId: string,
    endpointId: string,
    deliveryId: string,
  ): Promise<QueuedOutcome> {
    const queued = await this.transact(async (trx) => {
      if (!(await this.repository.findEndpoint(organizationId, libraryId, endpointId, trx, "refer"))) {
        return undefined;
      }
      const source = await this.repository.findAttempt(organizationId, endpointId, deliveryId, trx);
      if (!source) return undefined;
      const made = await this.deliveries.queueManual(trx, source, nowIso(this.clock));
      return {
        id: made.id,
        webhook_id: source.message_id,
        webhook_endpoint_id: endpointId,
        event: source.event,
        attempt: made.attempt,
      };
    });
    return this.#queued(queued);
  }
}
