import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SimulatedDriver } from "../../src/cloud/driver/simulated.ts";
import { DriverRejection } from "../../src/cloud/driver/types.ts";
import type { CloudServices } from "../../src/cloud/index.ts";
import type { Caller } from "../../src/cloud/locations.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { adminCaller, cloudServicesOver } from "./driver-services.ts";

/** The simulated driver, recording the volume resizes it is asked for; `refuseResize` makes it refuse them. */
class ResizeRecordingDriver extends SimulatedDriver {
  readonly resized: { uuid: string; sizeGb: number }[] = [];
  refuseResize = false;

  override async resizeDisk(location: string, uuid: string, sizeGb: number) {
    if (this.refuseResize) throw new DriverRejection("this volume cannot grow now");
    await super.resizeDisk(location, uuid, sizeGb);
    this.resized.push({ uuid, sizeGb });
  }
}

describe("growing a disk asks the driver to grow the volume", () => {
  let t: TestApp;
  let driver: ResizeRecordingDriver;
  let cloud: CloudServices;
  let caller: Caller;
  beforeAll(async () => {
    t = await startTestApp();
    driver = new ResizeRecordingDriver();
    cloud = cloudServicesOver(t, driver);
    caller = await adminCaller(t, cloud);
  });
  afterAll(() => t.close());

  const createDisk = async (sizeGb: number) => {
    const created = await cloud.disks.create(caller, {
      sizeGb,
      billingAccountId: undefined,
      displayName: "data",
    });
    if (created.outcome !== "created") throw new Error(`not created: ${JSON.stringify(created)}`);
    return created.disk;
  };

  it("once per growth, and not for a rename or the same size", async () => {
    const disk = await createDisk(10);
    expect((await cloud.disks.update(caller, disk.uuid, { sizeGb: 50 })).outcome).toBe("updated");
    expect((await cloud.disks.update(caller, disk.uuid, { sizeGb: 50 })).outcome).toBe("updated");
    expect((await cloud.disks.update(caller, disk.uuid, { displayName: "renamed" })).outcome).toBe("updated");
    expect(driver.resized).toEqual([{ uuid: disk.uuid, sizeGb: 50 }]);
  });

  it("keeps the old size when the infrastructure refuses", async () => {
    const disk = await createDisk(10);
    driver.refuseResize = true;
    try {
      expect(await cloud.disks.update(caller, disk.uuid, { sizeGb: 20, displayName: "bigger" })).toEqual({
        outcome: "rejected",
        message: "this volume cannot grow now",
      });
    } finally {
      driver.refuseResize = false;
    }
    const shown = await cloud.disks.get(caller, disk.uuid);
    expect(shown).toMatchObject({ outcome: "found", disk: { size_gb: 10, display_name: "data" } });
  });
});
