import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SimulatedDriver } from "../../src/cloud/driver/simulated.ts";
import type { VmSpec } from "../../src/cloud/driver/types.ts";
import type { CloudServices } from "../../src/cloud/index.ts";
import type { CreateVmInput, CreateVmOutcome } from "../../src/cloud/vm-service.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { adminCaller, cloudServicesOver } from "./driver-services.ts";

/** The simulated driver, counting the VMs it is asked to create; `beforeCreate` runs once, inside the call. */
class CountingDriver extends SimulatedDriver {
  readonly createdUuids: string[] = [];
  beforeCreate: (() => Promise<void>) | undefined;

  override async createVm(spec: VmSpec) {
    this.createdUuids.push(spec.uuid);
    const hook = this.beforeCreate;
    this.beforeCreate = undefined;
    await hook?.();
    return super.createVm(spec);
  }
}

const input = (name: string): CreateVmInput => ({
  name,
  osName: "ubuntu",
  osVersion: "24.04",
  vcpu: 1,
  ram: 1024,
  disks: 20,
  username: "cumulo",
  password: undefined,
  publicKeys: [],
  billingAccountId: undefined,
  description: "",
  reservePublicIp: true,
});

describe("creating a VM asks the driver once", () => {
  let t: TestApp;
  let driver: CountingDriver;
  let cloud: CloudServices;
  beforeAll(async () => {
    t = await startTestApp();
    driver = new CountingDriver();
    cloud = cloudServicesOver(t, driver);
  });
  afterAll(() => t.close());

  it("even when a concurrent creation makes its insert conflict and the transaction run again", async () => {
    const caller = await adminCaller(t, cloud);
    let second: Promise<CreateVmOutcome> | undefined;
    if (t.cumulo.store.dialect === "postgres") {
      // While the first creation holds its (uncommitted) addresses, start a second one: it reads the
      // same addresses as free, blocks on the first one's rows, and conflicts once they commit.
      // (SQLite runs one write transaction at a time, so there the two cannot overlap.)
      driver.beforeCreate = async () => {
        second = cloud.vms.create(caller, input("second"));
        await expect
          .poll(async () => {
            const { rows } = await sql<{ waiting: number }>`
              select count(*)::int as waiting from pg_stat_activity
              where datname = current_database() and wait_event_type = 'Lock'`.execute(t.cumulo.store.db);
            return rows[0]?.waiting ?? 0;
          })
          .toBeGreaterThan(0);
      };
    }
    const first = await cloud.vms.create(caller, input("first"));
    const results = [first, ...(second ? [await second] : [])];
    const vms = results.map((result) => {
      if (result.outcome !== "created") throw new Error(`not created: ${JSON.stringify(result)}`);
      return result.vm;
    });

    const listed = await cloud.vms.list(caller);
    expect(listed.map((vm) => vm.uuid).sort()).toEqual(vms.map((vm) => vm.uuid).sort());
    expect(driver.createdUuids.sort()).toEqual(vms.map((vm) => vm.uuid).sort());
    expect(new Set(vms.map((vm) => vm.private_ipv4)).size).toBe(vms.length);
    expect(new Set(vms.map((vm) => vm.public_ipv4)).size).toBe(vms.length);
    for (const vm of vms) {
      expect(vm.status).toBe("running");
      expect(vm.mac).toMatch(/^52:54:00(:[0-9a-f]{2}){3}$/);
    }
  });
});
