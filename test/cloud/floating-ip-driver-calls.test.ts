import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SimulatedDriver } from "../../src/cloud/driver/simulated.ts";
import { DriverRejection } from "../../src/cloud/driver/types.ts";
import type { CloudServices } from "../../src/cloud/index.ts";
import type { Caller } from "../../src/cloud/locations.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { adminCaller, cloudServicesOver } from "./driver-services.ts";

/** The simulated driver; `refuseRoutes` makes it refuse to route or withdraw a public address. */
class RouteRefusingDriver extends SimulatedDriver {
  refuseRoutes = false;

  override async routeFloatingIp() {
    if (this.refuseRoutes) throw new DriverRejection("the edge router is read-only now");
  }
}

describe("a floating IP the infrastructure refuses to route", () => {
  let t: TestApp;
  let driver: RouteRefusingDriver;
  let cloud: CloudServices;
  let caller: Caller;
  beforeAll(async () => {
    t = await startTestApp();
    driver = new RouteRefusingDriver();
    cloud = cloudServicesOver(t, driver);
    caller = await adminCaller(t, cloud);
  });
  afterAll(() => t.close());

  const refusing = async <T>(work: () => Promise<T>): Promise<T> => {
    driver.refuseRoutes = true;
    try {
      return await work();
    } finally {
      driver.refuseRoutes = false;
    }
  };

  it("is refused (409 at the API), not failed, on assign and unassign, and stays as it was", async () => {
    const vm = (await t.cloud("POST", "/v1/user-resource/vm", { form: { name: "routed" } })).body;
    const allocated = await cloud.floatingIps.allocate(caller, { billingAccountId: undefined, name: "ip" });
    if (allocated.outcome !== "allocated") throw new Error(`not allocated: ${JSON.stringify(allocated)}`);
    const { address } = allocated.ip;
    const target = { uuid: vm.uuid, type: "virtual_machine" as const };

    const refusedAssign = { outcome: "rejected", message: "the edge router is read-only now" };
    expect(await refusing(() => cloud.floatingIps.assign(caller, address, target))).toEqual(refusedAssign);
    expect(await cloud.floatingIps.get(caller, address)).toMatchObject({ ip: { assigned_to: null } });

    expect((await cloud.floatingIps.assign(caller, address, target)).outcome).toBe("assigned");
    expect(await refusing(() => cloud.floatingIps.unassign(caller, address))).toEqual(refusedAssign);
    expect(await cloud.floatingIps.get(caller, address)).toMatchObject({ ip: { assigned_to: vm.uuid } });
  });
});
