import { setTimeout as pause } from "node:timers/promises";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { CoreDeps, Services } from "../../src/services.ts";
import { type ClaimFor, DeliveryRepository } from "../../src/webhooks/delivery-repository.ts";
import { createLibrary, emitVideoEvent, endpointRow, openServicesOnly } from "./helpers.ts";

/**
 * A claim reads the oldest due attempts first; when those are all of endpoints it passes over (their
 * limit reached, or refused by the dispatcher), it finds the other endpoints' due attempts by endpoint,
 * never by reading through the backlog in front of them, and visits many endpoints in turn.
 */
// A claim reads the 4 × its limit oldest due attempts first: the slow backlogs here are longer.
const LIMIT = 4;
const BACKLOG = 5 * LIMIT;

describe("webhook claims behind a passed-over endpoint's backlog", () => {
  let close: () => Promise<void>;
  let core: CoreDeps;
  let services: Services;
  let deliveries: DeliveryRepository;
  let organizationId: string;
  let libraryId: string;

  beforeAll(async () => {
    // No dispatcher runs: the test claims by hand.
    ({ core, services, close } = await openServicesOnly());
    organizationId = (await services.identity.createOrganization("claims behind a backlog")).organization_id;
  });
  afterAll(() => close());
  afterEach(() => {
    vi.restoreAllMocks();
  });

  beforeEach(async () => {
    // Each case on a library of its own, with no attempt left from the one before and a fresh
    // repository (the endpoints' turn starts at the first).
    await core.store.db.deleteFrom("webhook_deliveries").execute();
    libraryId = await createLibrary(services, organizationId);
    deliveries = new DeliveryRepository(core.store.db, core.store.dialect);
  });

  /** The deeper read of the oldest attempts, and the look endpoint by endpoint. */
  const DEEPER = ") as oldest";
  const LOOK = "with recursive waiting";

  /**
   * Keeps the statements run from now on through the store's Kysely instance; the function returned
   * counts those holding a fragment.
   */
  function countStatements(): (fragment: string) => number {
    const run: string[] = [];
    const executor = core.store.db.getExecutor();
    const executeQuery = executor.executeQuery.bind(executor);
    const spy = vi.spyOn(executor, "executeQuery");
    spy.mockImplementation((query, ...rest) => {
      run.push(query.sql);
      return executeQuery(query, ...rest);
    });
    return (fragment) => run.filter((text) => text.includes(fragment)).length;
  }

  /** An endpoint of the library subscribed to `event` alone. */
  async function endpoint(event: string, id?: string): Promise<string> {
    const row = endpointRow(organizationId, libraryId, {
      events: JSON.stringify([event]),
      ...(id && { id }),
    });
    await services.webhookRepository.insertEndpoint(core.store.db, row);
    return row.id;
  }

  /** `count` notifications of `event`, due after every attempt queued before (due times are in ms). */
  const notify = async (event: "created" | "ready" | "uploading", count: number) => {
    await pause(2);
    for (let i = 0; i < count; i++) {
      await emitVideoEvent(core.store, services.webhooks, { organizationId, libraryId, event });
    }
    await pause(2);
  };

  const claim = (
    limit: number,
    saturated: string[],
    accept: (endpointId: string) => boolean = () => true,
    wantedBy: ClaimFor = { endpoints: [], anything: true },
  ) => {
    const now = new Date();
    return deliveries.claim(
      now.toISOString(),
      new Date(now.getTime() + 60_000).toISOString(),
      limit,
      saturated,
      accept,
      wantedBy,
    );
  };

  it("takes another endpoint's attempts queued behind more than a claim's worth of a saturated endpoint's", async () => {
    const slow = await endpoint("created");
    const fast = await endpoint("ready");
    await notify("created", BACKLOG);
    await notify("ready", 3);

    const claimed = await claim(LIMIT, [slow]);
    expect(claimed.map((delivery) => delivery.endpoint_id)).toEqual([fast, fast, fast]);
    // The slow endpoint's attempts were left waiting.
    const waiting = await core.store.db
      .selectFrom("webhook_deliveries")
      .select((eb) => eb.fn.countAll<number>().as("count"))
      .where("endpoint_id", "=", slow)
      .where("state", "=", "pending")
      .executeTakeFirstOrThrow();
    expect(Number(waiting.count)).toBe(BACKLOG);
  });

  it("asks about an endpoint it refuses once per claim, and takes the others' attempts behind it", async () => {
    const slow = await endpoint("created");
    const fast = await endpoint("ready");
    await notify("created", BACKLOG);
    await notify("ready", 2);
    const asked: string[] = [];

    const claimed = await claim(LIMIT, [], (endpointId) => {
      asked.push(endpointId);
      return endpointId !== slow;
    });
    expect(claimed.map((delivery) => delivery.endpoint_id)).toEqual([fast, fast]);
    expect(asked).toEqual([slow, fast, fast]);
  });

  it("takes what the oldest attempts offer, and what waits behind the backlog at the next claim", async () => {
    const slow = await endpoint("created");
    const fast = await endpoint("ready");
    // The fast endpoint's first attempt is among the oldest, its next ones behind the slow backlog.
    await notify("ready", 1);
    await notify("created", BACKLOG);
    await notify("ready", 2);

    expect((await claim(LIMIT, [slow])).map((delivery) => delivery.endpoint_id)).toEqual([fast]);
    expect((await claim(LIMIT, [slow])).map((delivery) => delivery.endpoint_id)).toEqual([fast, fast]);
  });

  it("seeks the endpoints a claim is made for behind the backlog, also beside attempts the oldest offered", async () => {
    const slow = await endpoint("created");
    const fast = await endpoint("ready");
    const other = await endpoint("uploading");
    await notify("uploading", 1);
    await notify("created", BACKLOG);
    await notify("ready", 2);

    // The oldest attempts offer the other endpoint's; the fast one asked, and is served too.
    const claimed = await claim(LIMIT, [slow], () => true, { endpoints: [fast], anything: false });
    expect(claimed.map((delivery) => delivery.endpoint_id)).toEqual([other, fast, fast]);
  });

  // QA of session 53: a claim looked at one group of 64 endpoints, so an endpoint among 200 held
  // back waited for the turn to come round to it (one claim per look, most of them at the poll).
  it("finds an endpoint to serve among many held back in one claim, wherever the last look stopped", async () => {
    const heldBack: string[] = [];
    for (let i = 0; i < 300; i++) heldBack.push(await endpoint("created"));
    const first = await endpoint("ready", "00000000-0000-4000-8000-000000000001");
    const middle = await endpoint("uploading", "80000000-0000-4000-8000-000000000001");
    // More due attempts of theirs than a claim reads in the store before it looks endpoint by endpoint.
    await notify("created", 14);

    // An endpoint in the middle of the ids: the look stops after it.
    await notify("uploading", 1);
    expect((await claim(LIMIT, heldBack)).map((delivery) => delivery.endpoint_id)).toEqual([middle]);
    // One before where the last look stopped: the looks go round to it.
    await notify("ready", 2);
    expect((await claim(LIMIT, heldBack)).map((delivery) => delivery.endpoint_id)).toEqual([first, first]);
    // None left to serve: every endpoint looked at once, and nothing taken.
    await notify("ready", 1);
    expect(await claim(LIMIT, [...heldBack, first])).toEqual([]);
  });

  it("takes attempts behind another endpoint's burst without looking at endpoints waiting for a retry", async () => {
    const burst = await endpoint("created");
    const fast = await endpoint("ready");
    const waiting: string[] = [];
    for (let i = 0; i < 20; i++) waiting.push(await endpoint("uploading"));
    await notify("uploading", 1);
    // Their attempts are due in an hour: they wait for a retry.
    await core.store.db
      .updateTable("webhook_deliveries")
      .set({ due_at: new Date(Date.now() + 3_600_000).toISOString() })
      .where("endpoint_id", "in", waiting)
      .execute();
    await notify("created", BACKLOG);
    await notify("ready", 2);
    const statements = countStatements();

    expect((await claim(LIMIT, [burst])).map((delivery) => delivery.endpoint_id)).toEqual([fast, fast]);
    expect(statements(LOOK)).toBe(0);
  });

  it("looks past the oldest attempts only in a claim for anything due", async () => {
    const slow = await endpoint("created");
    const fast = await endpoint("ready");
    await notify("created", BACKLOG);
    await notify("ready", 1);
    const statements = countStatements();

    // Made for the slow endpoint alone (its round finished): nothing it may take, no read behind.
    expect(await claim(LIMIT, [slow], () => true, { endpoints: [slow], anything: false })).toEqual([]);
    expect(statements(DEEPER)).toBe(0);
    // For anything due: the fast endpoint's attempt behind the backlog.
    expect((await claim(LIMIT, [slow])).map((delivery) => delivery.endpoint_id)).toEqual([fast]);
    expect(statements(DEEPER)).toBe(1);
  });

  // QA of session 54: endpoints the dispatcher refuses (slow ones, their set of slots full) were
  // refused one by one as the reads met them, and a claim ended with nothing while they hid the rest.
  it("passes over the endpoints it is told to before any read, and finds the attempts behind theirs", async () => {
    const refused: string[] = [];
    for (let i = 0; i < 200; i++) refused.push(await endpoint("created"));
    const fast = await endpoint("ready");
    await notify("created", 1);
    await notify("ready", 1);
    const slow = new Set(refused);
    const accept = (endpointId: string) => !slow.has(endpointId);

    const told = await claim(LIMIT, [], accept, { endpoints: [], anything: true, passOver: refused });
    expect(told.map((delivery) => delivery.endpoint_id)).toEqual([fast]);
  });

  // Behind 200 slow endpoints' 20,000 due attempts the deeper read was half the statements' time,
  // finding nothing the look would not (session 54).
  it("looks endpoint by endpoint without reading deeper once it knows few endpoints are waiting", async () => {
    const slow = await endpoint("created");
    const fast = await endpoint("ready");
    await notify("created", BACKLOG);
    await notify("ready", 1);
    const statements = countStatements();
    const reads = () => ({ deeper: statements(DEEPER), looks: statements(LOOK) });

    // Not known yet how many endpoints wait: the deeper read first, then a look that goes round them.
    expect(await claim(LIMIT, [slow, fast])).toEqual([]);
    expect(reads()).toEqual({ deeper: 1, looks: 1 });
    // Two endpoints wait: the look alone finds the fast endpoint's attempts.
    await notify("ready", 1);
    expect((await claim(LIMIT, [slow])).map((delivery) => delivery.endpoint_id)).toEqual([fast, fast]);
    expect(reads()).toEqual({ deeper: 1, looks: 2 });
  });
});
