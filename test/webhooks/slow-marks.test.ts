import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CoreDeps, Services } from "../../src/services.ts";
import { DeliveryRepository } from "../../src/webhooks/delivery-repository.ts";
import { createLibrary, endpointRow, openServicesOnly } from "./helpers.ts";

// What dispatchers start from after a restart (src/webhooks/dispatcher.ts, `#rememberSlowEndpoints`).
describe("webhook endpoints judged slow, as the store keeps them", () => {
  let close: () => Promise<void>;
  let core: CoreDeps;
  let services: Services;
  let deliveries: DeliveryRepository;
  let organizationId: string;
  let libraryId: string;

  beforeAll(async () => {
    ({ core, services, close } = await openServicesOnly());
    deliveries = new DeliveryRepository(core.store.db, core.store.dialect);
    organizationId = (await services.identity.createOrganization("slow marks")).organization_id;
    libraryId = await createLibrary(services, organizationId);
  });

  afterAll(() => close());

  const endpoint = async (): Promise<string> => {
    const row = endpointRow(organizationId, libraryId);
    await services.webhookRepository.insertEndpoint(core.store.db, row);
    return row.id;
  };
  const at = (minute: number) => new Date(Date.UTC(2026, 11, 7, 12, minute)).toISOString();

  it("keeps the latest judgment of each endpoint, the most recently judged first", async () => {
    const [a, b, c] = [await endpoint(), await endpoint(), await endpoint()];
    await deliveries.markSlow(
      new Map([
        [a, at(1)],
        [b, at(2)],
        [c, at(3)],
      ]),
    );
    expect(await deliveries.slowEndpoints(10)).toEqual([c, b, a]);
    // Judged slow again later, and one answered sooner.
    await deliveries.markSlow(
      new Map([
        [a, at(4)],
        [b, null],
      ]),
    );
    expect(await deliveries.slowEndpoints(10)).toEqual([a, c]);
    expect(await deliveries.slowEndpoints(1)).toEqual([a]);
    await deliveries.markSlow(
      new Map([
        [a, null],
        [c, null],
      ]),
    );
    expect(await deliveries.slowEndpoints(10)).toEqual([]);
  });

  it("leaves out endpoints deleted meanwhile, and forgets an endpoint's mark with the endpoint", async () => {
    const [kept, deleted] = [await endpoint(), await endpoint()];
    await deliveries.markSlow(
      new Map([
        [kept, at(5)],
        [randomUUID(), at(6)],
      ]),
    );
    expect(await deliveries.slowEndpoints(10)).toEqual([kept]);
    await deliveries.markSlow(new Map([[deleted, at(7)]]));
    await core.store.db.deleteFrom("webhook_endpoints").where("id", "=", deleted).execute();
    expect(await deliveries.slowEndpoints(10)).toEqual([kept]);
  });
});
