import { randomUUID } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Insertable } from "kysely";
import { Webhook } from "standardwebhooks";
import { loadConfig } from "../../src/config.ts";
import { closeCore, openCore } from "../../src/core.ts";
import { type CoreDeps, createServices, type Services } from "../../src/services.ts";
import type { Store } from "../../src/store/database.ts";
import { transactor } from "../../src/store/transactions.ts";
import type { VideoEvent, WebhookEmitter } from "../../src/webhooks/emitter.ts";
import type { WebhookEndpointTable } from "../../src/webhooks/tables.ts";
import type { TestApp } from "../support/app.ts";
import { createMigratedTestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";

/**
 * The store and services on a test store of their own, with no role running: no dispatcher claims or
 * sends, so a test queues, claims and records attempts by hand. `close` drops the store.
 */
export async function openServicesOnly(): Promise<{
  core: CoreDeps;
  services: Services;
  close(): Promise<void>;
}> {
  const store = await createMigratedTestStore();
  const core = await openCore(
    loadConfig({
      CUMULO_DATA_DIR: store.dataDir,
      CUMULO_LOG_LEVEL: "silent",
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    }),
  );
  return {
    core,
    services: createServices(core),
    async close() {
      await closeCore(core);
      await store.drop();
    },
  };
}

/** A library of the organization, made as the API makes one (its creator is any user uuid). */
export async function createLibrary(services: Services, organizationId: string): Promise<string> {
  const { library } = await services.media.libraries.create(organizationId, randomUUID(), {
    name: "Webhook test library",
  });
  return library.id;
}

export async function organizationOf(t: TestApp, key = t.adminKey): Promise<string> {
  const auth = await t.cumulo.services.identity.authenticate(key);
  if (!auth) throw new Error("key does not authenticate");
  return auth.organizationId;
}

/** Video data of a notification, as the media domain sends it. */
export const videoData = (organizationId: string, libraryId: string, videoId: string, status: string) => ({
  status,
  duration: 0,
  formatted_duration: "00:00:00",
  video_id: videoId,
  client_id: organizationId,
  libraryId,
  manifest_url: "",
  thumbnail_url: "",
  thumbnail_count: 0,
  direct_play_url: "",
  preview_animation_thumbnail_url: "",
});

/** Queues a video notification the way the media domain does: in a transaction, then notify(). */
export async function emitVideoEvent(
  store: Store,
  emitter: WebhookEmitter,
  input: { organizationId: string; libraryId: string; event: VideoEvent; videoId?: string },
): Promise<string> {
  const videoId = input.videoId ?? randomUUID();
  await transactor(store.db)((trx) =>
    emitter.emit(trx, {
      event: input.event,
      organizationId: input.organizationId,
      libraryId: input.libraryId,
      videoId,
      data: videoData(input.organizationId, input.libraryId, videoId, input.event),
    }),
  );
  emitter.notify();
  return videoId;
}

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

export type Responder = (request: Received, res: ServerResponse) => unknown;

/** A real HTTP receiver on 127.0.0.1 that records every request and answers with `respond`. */
export interface Receiver {
  url: string;
  received: Received[];
  respond: Responder;
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(respond: Responder = (_r, res) => res.end("ok")): Promise<Receiver> {
  const received: Received[] = [];
  const receiver: Receiver = {
    url: "",
    received,
    respond,
    waitFor: (count, timeoutMs = 30_000) =>
      waitUntil(
        () => (received.length >= count ? received : undefined),
        timeoutMs,
        `${count} requests (got ${received.length})`,
      ),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const entry = {
        path: req.url ?? "/",
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
        at: Date.now(),
      };
      received.push(entry);
      Promise.resolve(receiver.respond(entry, res)).catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return receiver;
}

/** A request header's value ("" when absent). */
export const header = (value: string | string[] | undefined) =>
  (Array.isArray(value) ? value[0] : value) ?? "";

/** The Standard Webhooks headers of a received request, as `Webhook.verify` reads them. */
export const verifyHeaders = (headers: IncomingHttpHeaders) => ({
  "webhook-id": header(headers["webhook-id"]),
  "webhook-timestamp": header(headers["webhook-timestamp"]),
  "webhook-signature": header(headers["webhook-signature"]),
});

/** Whether a receiver holding `secret` accepts the request (any one of its signatures matches). */
export function signedWith(secret: string, request: Pick<Received, "headers" | "body">): boolean {
  try {
    new Webhook(secret).verify(request.body, verifyHeaders(request.headers));
    return true;
  } catch {
    return false;
  }
}

/**
 * The endpoint's attempts in the store by state: none `pending` or `sending` means nothing more will be
 * sent to it (unless something new is emitted), which is how tests check that nothing more happens.
 */
export async function attemptsOf(t: TestApp, endpointId: string): Promise<{ open: number; all: number }> {
  const rows = await t.cumulo.store.db
    .selectFrom("webhook_deliveries")
    .select("state")
    .where("endpoint_id", "=", endpointId)
    .execute();
  return { open: rows.filter((row) => row.state !== "done").length, all: rows.length };
}

export const webhooksPath = (libraryId: string) => `/v1/media/libraries/${libraryId}/webhooks`;

/** Creates an endpoint through the API and returns its record. */
export async function createEndpoint(
  t: TestApp,
  libraryId: string,
  body: Record<string, unknown>,
  key?: string,
) {
  const response = await t.request("POST", webhooksPath(libraryId), {
    json: { name: "hook", events: ["*"], ...body },
    ...(key ? { key } : {}),
  });
  if (response.status !== 201) throw new Error(`endpoint not created: ${response.status} ${response.text}`);
  return response.body.data;
}

/** The endpoint's delivery records, once `predicate` holds for them. */
export async function deliveriesWhen(
  t: TestApp,
  libraryId: string,
  endpointId: string,
  predicate: (rows: any[]) => boolean,
  query = "limit=100",
  timeoutMs = 30_000,
): Promise<any[]> {
  return waitUntil(
    async () => {
      const response = await t.request("GET", `${webhooksPath(libraryId)}/${endpointId}/events?${query}`);
      const rows = response.body.data as any[];
      return predicate(rows) ? rows : undefined;
    },
    timeoutMs,
    "delivery records",
  );
}

/**
 * A webhook endpoint row as the API writes one, for tests that write the store directly (its secret
 * in the plain form of versions before sealing, which every node still reads).
 */
export function endpointRow(
  organizationId: string,
  libraryId: string,
  fields: Partial<Insertable<WebhookEndpointTable>> = {},
): Insertable<WebhookEndpointTable> {
  const now = new Date().toISOString();
  return {
    id: randomUUID(),
    organization_id: organizationId,
    library_id: libraryId,
    name: "hook",
    url: "https://example.com/hook",
    events: JSON.stringify(["*"]),
    headers: null,
    retry_policy: null,
    secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    is_active: true,
    created_by: null,
    updated_by: null,
    created_at: now,
    updated_at: now,
    ...fields,
  };
}

/** The endpoint's secret as the store holds it (sealed, or plain from versions before sealing). */
export async function storedSecret(t: TestApp, endpointId: string): Promise<string> {
  const row = await t.cumulo.store.db
    .selectFrom("webhook_endpoints")
    .select("secret")
    .where("id", "=", endpointId)
    .executeTakeFirstOrThrow();
  return row.secret;
}
