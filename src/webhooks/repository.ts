import { randomUUID } from "node:crypto";
import type { Insertable, Kysely, Selectable, Updateable } from "kysely";
import type { Page } from "../http/pagination.ts";
import { selectPage } from "../store/paging.ts";
import type { Database } from "../store/tables.ts";
import type { Executor } from "../store/transactions.ts";
import type { WebhookDeliveryTable, WebhookEndpointTable, WebhookMessageTable } from "./tables.ts";

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
    id: randomUUID(),
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

export class WebhookRepository {
  constructor(readonly db: Kysely<Database>) {}

  activeEndpointsOfLibrary(executor: Executor, libraryId: string) {
    return executor
      .selectFrom("webhook_endpoints")
      .select(["id", "events"])
      .where("library_id", "=", libraryId)
      .where("is_active", "=", true)
      .execute();
  }

  async insertMessage(executor: Executor, row: Insertable<WebhookMessageTable>): Promise<void> {
    await executor.insertInto("webhook_messages").values(row).execute();
  }

  async insertDeliveries(executor: Executor, rows: Insertable<WebhookDeliveryTable>[]): Promise<void> {
    if (rows.length > 0) await executor.insertInto("webhook_deliveries").values(rows).execute();
  }

  /** Everything webhook-related of a library, removed with the library. */
  async deleteLibrary(executor: Executor, libraryId: string): Promise<void> {
    await executor.deleteFrom("webhook_deliveries").where("library_id", "=", libraryId).execute();
    await executor.deleteFrom("webhook_messages").where("library_id", "=", libraryId).execute();
    await executor.deleteFrom("webhook_endpoints").where("library_id", "=", libraryId).execute();
  }

  async insertEndpoint(executor: Executor, row: Insertable<WebhookEndpointTable>): Promise<void> {
    await executor.insertInto("webhook_endpoints").values(row).execute();
  }

  /** The endpoint if it belongs to this organization's library; any other is not found. */
  findEndpoint(
    organizationId: string,
    libraryId: string,
    id: string,
    executor: Executor = this.db,
  ): Promise<EndpointRow | undefined> {
    return executor
      .selectFrom("webhook_endpoints")
      .selectAll()
      .where("organization_id", "=", organizationId)
      .where("library_id", "=", libraryId)
      .where("id", "=", id)
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
      .set(changes)
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
      .where("webhook_deliveries.state", "=", "done")
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
      .where("state", "=", "done")
      .executeTakeFirst();
  }

  /** The attempt of `event` most recently queued to an endpoint (the one just emitted, in its transaction). */
  latestQueued(executor: Executor, endpointId: string, event: string) {
    return executor
      .selectFrom("webhook_deliveries")
      .select(["id", "message_id", "attempt"])
      .where("endpoint_id", "=", endpointId)
      .where("event", "=", event)
      .where("state", "=", "pending")
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .executeTakeFirst();
  }
}
