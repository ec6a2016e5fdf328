import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CoreDeps, Services } from "../../src/services.ts";
import { createLibrary, emitVideoEvent, endpointRow, openServicesOnly } from "./helpers.ts";

/**
 * A notification queues one first attempt per active endpoint of its library subscribed to its event
 * (or to `*`), and writes its message only when there is one (PostgreSQL does this in one statement).
 */
describe("webhook notifications queued in the caller's transaction", () => {
  let close: () => Promise<void>;
  let core: CoreDeps;
  let services: Services;
  let organizationId: string;
  let libraryId: string;
  const endpoints: Record<string, string> = {};

  const addEndpoint = async (name: string, library: string, events: string[], isActive = true) => {
    const id = randomUUID();
    const now = new Date().toISOString();
    await services.webhookRepository.insertEndpoint(core.store.db, {
      id,
      organization_id: organizationId,
      library_id: library,
      name,
      url: "http://receiver.invalid/hook",
      events: JSON.stringify(events),
      headers: null,
      retry_policy: null,
      secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
      is_active: isActive,
      created_by: null,
      updated_by: null,
      created_at: now,
      updated_at: now,
    });
    endpoints[name] = id;
  };

  beforeAll(async () => {
    // No dispatcher runs: every queued attempt stays waiting.
    ({ core, services, close } = await openServicesOnly());
    organizationId = (await services.identity.createOrganization("queueing")).organization_id;
    libraryId = await createLibrary(services, organizationId);
    const otherLibrary = await createLibrary(services, organizationId);
    await addEndpoint("created", libraryId, ["created", "ready"]);
    await addEndpoint("everything", libraryId, ["*"]);
    await addEndpoint("ready only", libraryId, ["ready"]);
    await addEndpoint("switched off", libraryId, ["*"], false);
    await addEndpoint("other library", otherLibrary, ["*"]);
  });

  afterAll(() => close());

  const messagesOf = (videoId: string) =>
    core.store.db
      .selectFrom("webhook_messages")
      .select(["id", "organization_id", "library_id", "event", "body", "created_at"])
      .where("video_id", "=", videoId)
      .execute();

  it("queues a first attempt for each active subscribed endpoint of the library, due at once", async () => {
    const videoId = await emitVideoEvent(core.store, services.webhooks, {
      organizationId,
      libraryId,
      event: "created",
    });
    const [message, ...others] = await messagesOf(videoId);
    expect(others).toEqual([]);
    expect(message).toMatchObject({
      organization_id: organizationId,
      library_id: libraryId,
      event: "created",
    });
    expect(JSON.parse(message?.body ?? "{}")).toMatchObject({
      event: "created",
      payload: { video_id: videoId },
    });
    const attempts = await core.store.db
      .selectFrom("webhook_deliveries")
      .selectAll()
      .where("message_id", "=", message?.id ?? "")
      .orderBy("endpoint_id")
      .execute();
    const expected = [endpoints.created, endpoints.everything].sort();
    expect(attempts.map((row) => row.endpoint_id)).toEqual(expected);
    for (const row of attempts) {
      expect(row).toMatchObject({
        organization_id: organizationId,
        library_id: libraryId,
        video_id: videoId,
        event: "created",
        attempt: 1,
        state: "pending",
        due_at: message?.created_at,
        locked_until: null,
        response_status: null,
        next_retry_at: null,
        created_at: message?.created_at,
        updated_at: message?.created_at,
      });
      expect(Boolean(row.success)).toBe(false);
      expect(Boolean(row.manual)).toBe(false);
      expect(row.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    expect(new Set(attempts.map((row) => row.id)).size).toBe(attempts.length);
  });

  it("writes no message when no active endpoint of the library subscribes to the event", async () => {
    await services.webhookRepository.updateEndpoint(
      core.store.db,
      organizationId,
      endpoints.everything ?? "",
      {
        is_active: false,
      },
    );
    const videoId = await emitVideoEvent(core.store, services.webhooks, {
      organizationId,
      libraryId,
      event: "uploading",
    });
    expect(await messagesOf(videoId)).toEqual([]);
  });

  it("queues an attempt for each of thousands of endpoints (more values than SQLite binds in one statement)", async () => {
    const crowded = await createLibrary(services, organizationId);
    const count = 2500;
    for (let added = 0; added < count; added += 500) {
      await core.store.db
        .insertInto("webhook_endpoints")
        .values(Array.from({ length: 500 }, () => endpointRow(organizationId, crowded)))
        .execute();
    }
    const videoId = await emitVideoEvent(core.store, services.webhooks, {
      organizationId,
      libraryId: crowded,
      event: "created",
    });
    const queued = await core.store.db
      .selectFrom("webhook_deliveries")
      .select((eb) => [
        eb.fn.countAll<number>().as("attempts"),
        eb.fn.count<number>("endpoint_id").distinct().as("endpoints"),
      ])
      .where("video_id", "=", videoId)
      .executeTakeFirstOrThrow();
    expect({ attempts: Number(queued.attempts), endpoints: Number(queued.endpoints) }).toEqual({
      attempts: count,
      endpoints: count,
    });
  });
});
