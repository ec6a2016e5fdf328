import { type Insertable, type Kysely, type Selectable, sql, type Updateable } from "kysely";
import type { Page } from "../http/pagination.ts";
import { timeOrderedUuid, timeOrderedUuidPrefix } from "../ids.ts";
import { touchedOnlyWhenChanged } from "../store/changes.ts";
import type { DialectName } from "../store/database.ts";
import { selectPage } from "../store/paging.ts";
import { PreparedQuery, type ValueOf } from "../store/prepared.ts";
import type { Database } from "../store/tables.ts";
import type { Executor } from "../store/transactions.ts";
import { SEALED_TEXT_START } from "./sealed-headers.ts";
import {
  DONE,
  WAITING,
  type WebhookDeliveryTable,
  type WebhookEndpointTable,
  type WebhookMessageTable,
} from "./tables.ts";

/** What every attempt of one message to one endpoint carries. */
export type DeliveryTarget = Pick<
  WebhookDeliveryTable,
  "message_id" | "endpoint_id" | "organization_id" | "library_id" | "video_id" | "event"
>;

/** A new attempt row, waiting for the dispatcher until `dueAt`. */
export function pendingAttempt(
  target: DeliveryTarget,
  options: { attempt: number; dueAt: string; now: string; manual?: boolean },
): Insertable<WebhookDeliveryTable> {
  return {
    id: timeOrderedUuid(),
    message_id: target.message_id,
    endpoint_id: target.endpoint_id,
    organization_id: target.organization_id,
    library_id: target.library_id,
    video_id: target.video_id,
    event: target.event,
    attempt: options.attempt,
    state: "pending",
    due_at: options.dueAt,
    locked_until: null,
    success: false,
    response_status: null,
    response_body: null,
    error: null,
    duration_ms: null,
    next_retry_at: null,
    manual: options.manual ?? false,
    created_at: options.now,
    updated_at: options.now,
  };
}
export type EndpointRow = Selectable<WebhookEndpointTable>;

/** Filters of an endpoint's delivery history. */
export interface AttemptFilters {
  event?: string;
  success?: boolean;
}

export type MessageRow = Selectable<WebhookMessageTable>;
type DeliveryRow = Insertable<WebhookDeliveryTable>;

/** The columns a row sets (as the query builder does, leaving out undefined ones). */
const columnsOf = <Row extends object>(row: Row) =>
  (Object.keys(row) as (keyof Row & string)[]).filter((key) => row[key] !== undefined);

/** The row's columns, each a value of a prepared query reading it from `values`. */
function rowValues<Values, Row extends object>(
  value: ValueOf<Values>,
  row: Row,
  read: (values: Values) => Row,
): Row {
  return Object.fromEntries(columnsOf(row).map((key) => [key, value((values) => read(values)[key])])) as Row;
}

/** First attempts written by one insert: well under SQLite's limit of bound values, at a row's columns. */
const ATTEMPTS_PER_INSERT = 1000;

/** The message's first attempt to each of `endpointIds`, due when the message was made. */
const firstAttempts = (message: MessageRow, endpointIds: string[]) =>
  endpointIds.map((endpointId) =>
    pendingAttempt(
      {
        message_id: message.id,
        endpoint_id: endpointId,
        organization_id: message.organization_id,
        library_id: message.library_id,
        video_id: message.video_id,
        event: message.event,
      },
      { attempt: 1, dueAt: message.created_at, now: message.created_at },
    ),
  );

export class WebhookRepository {
  // Run with every notification (its transaction), so built once (src/store/prepared.ts).
  readonly #activeEndpoints = new PreparedQuery((value: ValueOf<{ libraryId: string }>) =>
    this.db
      .selectFrom("webhook_endpoints")
      .select(["id", "events"])
      .where(
        "library_id",
        "=",
        value((values) => values.libraryId),
      )
      .where("is_active", "=", true),
  );
  readonly #insertMessage = new PreparedQuery((value: ValueOf<MessageRow>, row) =>
    this.db.insertInto("webhook_messages").values(rowValues(value, row, (values) => values)),
  );
  // Compiled per number of rows.
  readonly #insertDeliveries = new PreparedQuery(
    (value: ValueOf<DeliveryRow[]>, rows) =>
      this.db
        .insertInto("webhook_deliveries")
        .values(rows.map((row, index) => rowValues(value, row, (values) => values[index] as DeliveryRow))),
    (rows) => String(rows.length),
  );
  /**
   * PostgreSQL: the three statements above as one, so a notification costs its transaction one round
   * trip instead of three. Endpoints subscribe with `events` (jsonb) naming the event or `*`; the message
   * is written only when one does, and each attempt gets a fresh id from the database.
   */
  readonly #queueForSubscribers = new PreparedQuery((value: ValueOf<MessageRow>) => {
    const message = (column: keyof MessageRow) => value((values) => values[column]);
    // Each attempt's id is a version 7 UUID, as on SQLite: this moment's time part and version, then
    // gen_random_uuid's random bits (from its 16th character on, as `timeOrderedUuid` takes randomUUID's).
    const attemptIdTime = value(() => timeOrderedUuidPrefix());
    return {
      compile: () =>
        // The subscribers are locked (in id order, as a library's deletion locks them): an endpoint
        // deleted meanwhile is waited for and left out, where it failed the attempts' foreign key.
        sql`with subscribers as (
              select id from webhook_endpoints
              where library_id = ${message("library_id")}::uuid and is_active
                and (events ? '*' or events ? ${message("event")}::text)
              order by id
              for key share
            ), message as (
              insert into webhook_messages (id, organization_id, library_id, video_id, event, body, created_at)
              select ${message("id")}::text, ${message("organization_id")}::uuid, ${message("library_id")}::uuid,
                ${message("video_id")}::uuid, ${message("event")}::text, ${message("body")}::text,
                ${message("created_at")}::timestamptz
              where exists (select from subscribers)
            )
            insert into webhook_deliveries (id, message_id, endpoint_id, organization_id, library_id, video_id,
              event, attempt, state, due_at, success, manual, created_at, updated_at)
            select (${attemptIdTime}::text || substr(gen_random_uuid()::text, 16))::uuid, ${message("id")}::text, id, ${message("organization_id")}::uuid,
              ${message("library_id")}::uuid, ${message("video_id")}::uuid, ${message("event")}::text, 1, 'pending',
              ${message("created_at")}::timestamptz, false, false, ${message("created_at")}::timestamptz,
              ${message("created_at")}::timestamptz
            from subscribers`.compile(this.db),
    };
  });

  constructor(
    readonly db: Kysely<Database>,
    private readonly dialect: DialectName,
  ) {}

  /**
   * Writes the message and its first attempt for every active endpoint of its library subscribed to
   * its event; nothing when there is none. Returns how many attempts were queued.
   */
  async queueForSubscribers(executor: Executor, message: MessageRow): Promise<number> {
    if (this.dialect === "postgres") {
      return Number((await this.#queueForSubscribers.execute(executor, message)).numAffectedRows ?? 0);
    }
    const subscribers = (await this.#subscribers(executor, message.library_id, message.event)).map(
      (endpoint) => endpoint.id,
    );
    await this.queueMessage(executor, message, subscribers);
    return subscribers.length;
  }

  /** Whether any active endpoint of the library is subscribed to the event. */
  async hasSubscribers(executor: Executor, libraryId: string, event: string): Promise<boolean> {
    return (await this.#subscribers(executor, libraryId, event)).length > 0;
  }

  async #subscribers(executor: Executor, libraryId: string, event: string) {
    const { rows } = await this.#activeEndpoints.execute(executor, { libraryId });
    return rows.filter((endpoint) => {
      const events = JSON.parse(endpoint.events) as string[];
      return events.includes("*") || events.includes(event);
    });
  }

  /** Writes the message and its first attempt to each of `endpointIds` (none: nothing is written). */
  async queueMessage(executor: Executor, message: MessageRow, endpointIds: string[]): Promise<void> {
    if (endpointIds.length === 0) return;
    await this.#insertMessage.execute(executor, message);
    // In slices: SQLite binds at most 32,766 values per statement, 20 per attempt (a library of more
    // than 1,638 endpoints, with CUMULO_WEBHOOK_ENDPOINTS_MAX raised, failed every notification).
    for (let from = 0; from < endpointIds.length; from += ATTEMPTS_PER_INSERT) {
      const slice = endpointIds.slice(from, from + ATTEMPTS_PER_INSERT);
      await this.#insertDeliveries.execute(executor, firstAttempts(message, slice));
    }
  }

  /** Everything webhook-related of a library, removed with the library; answers the endpoints' ids. */
  async deleteLibrary(executor: Executor, libraryId: string): Promise<string[]> {
    // On PostgreSQL the endpoints are locked first, in id order, as one endpoint's deletion locks it:
    // a dispatcher recording a failure (which locks them in the same order) or a notification being
    // queued is waited for, instead of a deadlock with the attempts' rows, or a message it commits
    // after the messages below are gone.
    if (this.dialect === "postgres") {
      await executor
        .selectFrom("webhook_endpoints")
        .select("id")
        .where("library_id", "=", libraryId)
        .orderBy("id")
        .forUpdate()
        .execute();
    }
    // Through the endpoints, whose index the attempts' own endpoint index follows (the attempts
    // have none by library: every queued attempt would pay for it).
    const endpoints = executor
      .selectFrom("webhook_endpoints")
      .select("id")
      .where("library_id", "=", libraryId);
    await executor.deleteFrom("webhook_deliveries").where("endpoint_id", "in", endpoints).execute();
    await executor.deleteFrom("webhook_messages").where("library_id", "=", libraryId).execute();
    const deleted = await executor
      .deleteFrom("webhook_endpoints")
      .where("library_id", "=", libraryId)
      .returning("id")
      .execute();
    return deleted.map((row) => row.id);
  }

  /** How many endpoints the library has. */
  async countEndpoints(executor: Executor, libraryId: string): Promise<number> {
    const row = await executor
      .selectFrom("webhook_endpoints")
      .select((eb) => eb.fn.countAll<number>().as("total"))
      .where("library_id", "=", libraryId)
      .executeTakeFirstOrThrow();
    return Number(row.total);
  }

  /**
   * The endpoints whose stored secret starts with `prefix` (a start-up pass: once every secret is
   * sealed it reads none). `_` in the prefix matches any character, so callers check what they get.
   */
  /** The sealed secret written last, of any endpoint: what the start-up check of the secret key opens. */
  newestSealedSecret(plainPrefix: string) {
    return this.db
      .selectFrom("webhook_endpoints")
      .select(["id", "secret"])
      .where("secret", "not like", `${plainPrefix}%`)
      .orderBy("updated_at", "desc")
      .limit(1)
      .executeTakeFirst();
  }

  listSecretsStartingWith(prefix: string) {
    return this.db
      .selectFrom("webhook_endpoints")
      .select(["id", "secret"])
      .where("secret", "like", `${prefix}%`)
      .execute();
  }

  /**
   * Endpoints whose custom headers are stored in plain text, as versions before sealing wrote them:
   * any object but the sealed form (`SEALED_TEXT_START`). Compared as text: PostgreSQL's `json` has
   * no equality, and keeps the text as written.
   */
  listPlainHeaders() {
    return this.db
      .selectFrom("webhook_endpoints")
      .select(["id", sql<string>`cast(headers as text)`.as("headers")])
      .where(sql<boolean>`cast(headers as text) like '{%'`)
      .where(sql<boolean>`cast(headers as text) not like ${`${SEALED_TEXT_START}%`}`)
      .execute();
  }

  /** Replaces the endpoint's stored headers if they are still `from` (as text); whether they were. */
  async replaceHeaders(id: string, from: string, to: string): Promise<boolean> {
    const result = await this.db
      .updateTable("webhook_endpoints")
      .set({ headers: to })
      .where("id", "=", id)
      .where(sql<boolean>`cast(headers as text) = ${from}`)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Replaces the endpoint's stored secret if it is still `from`; whether it was. */
  async replaceSecret(id: string, from: string, to: string): Promise<boolean> {
    const result = await this.db
      .updateTable("webhook_endpoints")
      .set({ secret: to })
      .where("id", "=", id)
      .where("secret", "=", from)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async insertEndpoint(executor: Executor, row: Insertable<WebhookEndpointTable>): Promise<void> {
    await executor.insertInto("webhook_endpoints").values(row).execute();
  }

  /**
   * The endpoint if it belongs to this organization's library; any other is not found. With `lock`
   * (PostgreSQL; SQLite runs one write transaction at a time) the row stays locked until the
   * transaction ends: `delete` for its deletion, `update` for a write made from the row's values
   * (a rotation keeps the secret it replaces), `refer` for a transaction that queues a delivery to
   * it, which a deletion then waits for (or which then finds it gone) instead of failing on the
   * delivery's reference. `refer` does not block the dispatcher's update of the endpoint (a 410).
   */
  findEndpoint(
    organizationId: string,
    libraryId: string,
    id: string,
    executor: Executor = this.db,
    lock?: "delete" | "update" | "refer",
  ): Promise<EndpointRow | undefined> {
    const postgres = this.dialect === "postgres";
    return executor
      .selectFrom("webhook_endpoints")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .where("library_id", "=", libraryId)
      .where("id", "=", id)
      .$if(postgres && (lock === "delete" || lock === "update"), (qb) => qb.forUpdate())
      .$if(postgres && lock === "refer", (qb) => qb.forKeyShare())
      .executeTakeFirst();
  }

  listEndpoints(organizationId: string, libraryId: string, page: Page) {
    const query = this.db
      .selectFrom("webhook_endpoints")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .where("library_id", "=", libraryId)
      .orderBy("created_at", "desc")
      .orderBy("id", "desc");
    return selectPage(query, page);
  }

  async updateEndpoint(
    executor: Executor,
    organizationId: string,
    id: string,
    changes: Updateable<WebhookEndpointTable>,
  ): Promise<void> {
    await executor
      .updateTable("webhook_endpoints")
      .set(touchedOnlyWhenChanged(changes, ["headers"]))
      .where("organization_id", "=", organizationId)
      .where("id", "=", id)
      .execute();
  }

  /** Removes the endpoint with its delivery attempts (messages stay: other endpoints share them). */
  async deleteEndpoint(executor: Executor, organizationId: string, id: string): Promise<boolean> {
    await executor
      .deleteFrom("webhook_deliveries")
      .where("organization_id", "=", organizationId)
      .where("endpoint_id", "=", id)
      .execute();
    const result = await executor
      .deleteFrom("webhook_endpoints")
      .where("organization_id", "=", organizationId)
      .where("id", "=", id)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** Attempts made to one endpoint (pending ones are not attempts yet), newest first. */
  listAttempts(organizationId: string, endpointId: string, filters: AttemptFilters, page: Page) {
    const query = this.db
      .selectFrom("webhook_deliveries")
      .innerJoin("webhook_messages", "webhook_messages.id", "webhook_deliveries.message_id")
      .selectAll("webhook_deliveries")
      .select("webhook_messages.body")
      .where("webhook_deliveries.organization_id", "=", organizationId)
      .where("webhook_deliveries.endpoint_id", "=", endpointId)
      .where("webhook_deliveries.state", "=", DONE)
      .$if(filters.event !== undefined, (qb) =>
        qb.where("webhook_deliveries.event", "=", filters.event ?? ""),
      )
      .$if(filters.success !== undefined, (qb) =>
        qb.where("webhook_deliveries.success", "=", filters.success ?? false),
      )
      .orderBy("webhook_deliveries.created_at", "desc")
      .orderBy("webhook_deliveries.id", "desc");
    return selectPage(query, page);
  }

  findAttempt(organizationId: string, endpointId: string, id: string, executor: Executor = this.db) {
    return executor
      .selectFrom("webhook_deliveries")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .where("endpoint_id", "=", endpointId)
      .where("id", "=", id)
      .where("state", "=", DONE)
      .executeTakeFirst();
  }

  /** The attempt of `event` most recently queued to an endpoint (the one just emitted, in its transaction). */
  latestQueued(executor: Executor, endpointId: string, event: string) {
    return executor
      .selectFrom("webhook_deliveries")
      .select(["id", "message_id", "attempt"])
      .where("endpoint_id", "=", endpointId)
      .where("event", "=", event)
      .where("state", "=", WAITING)
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .executeTakeFirst();
  }
}
