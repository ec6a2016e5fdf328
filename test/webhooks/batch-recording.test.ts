import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CoreDeps, Services } from "../../src/services.ts";
import {
  type AttemptRecord,
  type ClaimedDelivery,
  DeliveryRepository,
} from "../../src/webhooks/delivery-repository.ts";
import { createLibrary, emitVideoEvent, endpointRow, openServicesOnly } from "./helpers.ts";

/**
 * Outcomes of finished attempts are written in batches, one transaction each. A batch the store
 * refuses as a whole falls back to one transaction per attempt: the attempt that cannot be written
 * stays claimed (sent again after its lease), every other one is recorded.
 */
describe("webhook outcomes recorded in batches", () => {
  let close: () => Promise<void>;
  let core: CoreDeps;
  let services: Services;
  let deliveries: DeliveryRepository;
  let organizationId: string;
  let libraryId: string;

  beforeAll(async () => {
    // No dispatcher runs: the test claims and records by hand.
    ({ core, services, close } = await openServicesOnly());
    deliveries = new DeliveryRepository(core.store.db, core.store.dialect);
    organizationId = (await services.identity.createOrganization("batch recording")).organization_id;
    libraryId = await createLibrary(services, organizationId);
    await services.webhookRepository.insertEndpoint(
      core.store.db,
      endpointRow(organizationId, libraryId, { name: "batch", url: "http://receiver.invalid/hook" }),
    );
  });

  afterAll(() => close());

  const claimAll = async (count: number): Promise<ClaimedDelivery[]> => {
    for (let i = 0; i < count; i++) {
      await emitVideoEvent(core.store, services.webhooks, { organizationId, libraryId, event: "created" });
    }
    const now = new Date();
    const claimed = await deliveries.claim(
      now.toISOString(),
      new Date(now.getTime() + 60_000).toISOString(),
      count,
      [],
      () => true,
    );
    expect(claimed).toHaveLength(count);
    return claimed;
  };

  const outcome = (success: boolean): AttemptRecord => ({
    success,
    response_status: success ? 200 : 500,
    response_body: success ? "ok" : "no",
    error: null,
    duration_ms: 3,
    attempted_at: new Date().toISOString(),
  });

  const rowsOf = (messageId: string) =>
    core.store.db
      .selectFrom("webhook_deliveries")
      .select(["attempt", "state", "success", "next_retry_at"])
      .where("message_id", "=", messageId)
      .orderBy("attempt")
      .execute();

  /** Makes the store refuse to record the outcome of one attempt, as a failing write would. */
  async function refuseRecording(deliveryId: string): Promise<void> {
    if (core.store.dialect === "postgres") {
      await sql
        .raw(`create function refuse_recording() returns trigger language plpgsql as $$
          begin raise exception 'recording refused'; end $$`)
        .execute(core.store.db);
      await sql
        .raw(`create trigger refuse_recording before update on webhook_deliveries for each row
          when (new.id = '${deliveryId}' and new.state = 'done') execute function refuse_recording()`)
        .execute(core.store.db);
    } else {
      await sql
        .raw(`create trigger refuse_recording before update on webhook_deliveries
          when new.id = '${deliveryId}' and new.state = 'done'
          begin select raise(abort, 'recording refused'); end`)
        .execute(core.store.db);
    }
  }

  it("records every attempt of a batch, with the retry a failure schedules", async () => {
    const [failed, succeeded] = await claimAll(2);
    if (!failed || !succeeded) throw new Error("claim failed");
    const retryAt = new Date(Date.now() + 5000).toISOString();
    let attemptsMadeSeen: number | undefined;
    const results = await deliveries.recordMany([
      {
        delivery: failed,
        outcome: outcome(false),
        plan: (made) => {
          attemptsMadeSeen = made;
          return { nextRetryAt: retryAt, deactivateEndpoint: false };
        },
      },
      {
        delivery: succeeded,
        outcome: outcome(true),
        plan: { nextRetryAt: undefined, deactivateEndpoint: false },
      },
    ]);
    expect(results.map((result) => result.recorded)).toEqual([true, true]);
    expect(results[0]?.nextRetryAt).toBe(retryAt);
    expect(attemptsMadeSeen).toBe(1);
    const failedRows = await rowsOf(failed.message_id);
    expect(failedRows.map((row) => [row.attempt, row.state, Boolean(row.success)])).toEqual([
      [1, "done", false],
      [2, "pending", false],
    ]);
    expect(failedRows[0]?.next_retry_at).toBe(retryAt);
    const succeededRows = await rowsOf(succeeded.message_id);
    expect(succeededRows.map((row) => [row.attempt, row.state, Boolean(row.success)])).toEqual([
      [1, "done", true],
    ]);
  });

  it("records a success with its answer only under the claim's own lease", async () => {
    const [lost, held] = await claimAll(2);
    if (!lost || !held) throw new Error("claim failed");
    const success = { nextRetryAt: undefined, deactivateEndpoint: false };
    const answered = {
      ...outcome(true),
      response_status: 204,
      response_body: "",
      error: null,
      duration_ms: 7,
    };
    const otherLease = new Date(Date.parse(lost.lease) + 1000).toISOString();
    const results = await deliveries.recordMany([
      { delivery: { ...lost, lease: otherLease }, outcome: answered, plan: success },
      { delivery: held, outcome: answered, plan: success },
    ]);
    expect(results.map((result) => result.recorded)).toEqual([false, true]);
    expect((await rowsOf(lost.message_id)).map((row) => row.state)).toEqual(["sending"]);
    const recorded = await core.store.db
      .selectFrom("webhook_deliveries")
      .selectAll()
      .where("id", "=", held.id)
      .executeTakeFirstOrThrow();
    expect(recorded).toMatchObject({
      state: "done",
      locked_until: null,
      response_status: 204,
      response_body: "",
      error: null,
      duration_ms: 7,
      next_retry_at: null,
      created_at: answered.attempted_at,
      updated_at: answered.attempted_at,
    });
    expect(Boolean(recorded.success)).toBe(true);
  });

  it("records the others when the store refuses one attempt of the batch", async () => {
    const [first, refused, last] = await claimAll(3);
    if (!first || !refused || !last) throw new Error("claim failed");
    await refuseRecording(refused.id);
    const success = { nextRetryAt: undefined, deactivateEndpoint: false };
    const results = await deliveries.recordMany([
      { delivery: first, outcome: outcome(true), plan: success },
      { delivery: refused, outcome: outcome(true), plan: success },
      { delivery: last, outcome: outcome(true), plan: success },
    ]);
    expect(results.map((result) => result.recorded)).toEqual([true, false, true]);
    expect(String(results[1]?.error)).toContain("recording refused");
    for (const recorded of [first, last]) {
      expect((await rowsOf(recorded.message_id)).map((row) => row.state)).toEqual(["done"]);
    }
    // Still claimed under its lease: once the lease runs out, a dispatcher takes and sends it again.
    expect((await rowsOf(refused.message_id)).map((row) => row.state)).toEqual(["sending"]);
    const afterLease = new Date(Date.parse(refused.lease) + 1000);
    const retaken = await deliveries.claim(
      afterLease.toISOString(),
      new Date(afterLease.getTime() + 60_000).toISOString(),
      10,
      [],
      () => true,
    );
    // (the retry scheduled by the first test is due by then too)
    expect(retaken.map((delivery) => delivery.id)).toContain(refused.id);
  });
});
