import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

/** What a resource shows after something it refers to goes away (a Terraform-like refresh reads it). */
describe("cloud resources after a resource they refer to is deleted", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  const createVm = async (name: string) =>
    (await t.cloud("POST", "/v1/user-resource/vm", { form: { name } })).body;
  /** Lets the clock move past a stored millisecond timestamp. */
  const tick = () => new Promise((resolve) => setTimeout(resolve, 5));

  it("a load balancer whose target VM is deleted shows the change in updated_at, as removing the target does", async () => {
    const vm = await createVm("target");
    const created = await t.cloud("POST", "/v1/network/load_balancers", {
      json: { targets: [{ target_uuid: vm.uuid, target_type: "vm" }] },
    });
    expect(created.status).toBe(200);
    await tick();
    expect((await t.cloud("DELETE", "/v1/user-resource/vm", { form: { uuid: vm.uuid } })).status).toBe(200);
    const shown = (await t.cloud("GET", `/v1/network/load_balancers/${created.body.uuid}`)).body;
    expect(shown.targets).toEqual([]);
    expect(shown.updated_at > created.body.updated_at).toBe(true);
  });

  it("answers a delete repeated while the first one runs (a retry after a timeout) 404, not a false 409", async () => {
    for (let round = 0; round < 8; round++) {
      const disk = (await t.cloud("POST", "/v1/storage/disks", { form: { size_gb: "1" } })).body;
      const ip = (await t.cloud("POST", "/v1/network/ip_addresses", { json: {} })).body;
      const [disks, ips] = await Promise.all([
        Promise.all([1, 2].map(() => t.cloud("DELETE", `/v1/storage/disks/${disk.uuid}`))),
        Promise.all([1, 2].map(() => t.cloud("DELETE", `/v1/network/ip_addresses/${ip.address}`))),
      ]);
      expect(disks.map((answer) => answer.status).sort()).toEqual([200, 404]);
      expect(ips.map((answer) => answer.status).sort()).toEqual([200, 404]);
    }
  });

  it("answers an attach of a disk deleted at the same moment 404, not a false 409", async () => {
    const vm = await createVm("attach-race");
    for (let round = 0; round < 8; round++) {
      const disk = (await t.cloud("POST", "/v1/storage/disks", { form: { size_gb: "1" } })).body;
      const [attached, deleted] = await Promise.all([
        t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
          form: { uuid: vm.uuid, storage_uuid: disk.uuid },
        }),
        t.cloud("DELETE", `/v1/storage/disks/${disk.uuid}`),
      ]);
      // Either the attach came first (the delete is refused) or the delete did (the disk is gone).
      expect([
        [200, 409],
        [404, 200],
      ]).toContainEqual([attached.status, deleted.status]);
      if (attached.status === 200) {
        await t.cloud("POST", "/v1/user-resource/vm/storage/detach", {
          form: { uuid: vm.uuid, storage_uuid: disk.uuid },
        });
      }
    }
  });

  it("answers an assign of a floating IP deleted at the same moment 404, not a false 409", async () => {
    const vm = await createVm("assign-race");
    for (let round = 0; round < 8; round++) {
      const ip = (await t.cloud("POST", "/v1/network/ip_addresses", { json: {} })).body;
      const [assigned, deleted] = await Promise.all([
        t.cloud("POST", `/v1/network/ip_addresses/${ip.address}/assign`, {
          json: { assigned_to: vm.uuid, assigned_to_resource_type: "virtual_machine" },
        }),
        t.cloud("DELETE", `/v1/network/ip_addresses/${ip.address}`),
      ]);
      expect([
        [200, 409],
        [404, 200],
      ]).toContainEqual([assigned.status, deleted.status]);
      if (assigned.status === 200) await t.cloud("POST", `/v1/network/ip_addresses/${ip.address}/unassign`);
    }
  });

  it("deletes a VM and the load balancer targeting it at the same moment, both answering 200", async () => {
    for (let round = 0; round < 5; round++) {
      const vm = await createVm(`together-${round}`);
      const lb = (
        await t.cloud("POST", "/v1/network/load_balancers", {
          json: { targets: [{ target_uuid: vm.uuid, target_type: "vm" }] },
        })
      ).body;
      const answers = await Promise.all([
        t.cloud("DELETE", "/v1/user-resource/vm", { form: { uuid: vm.uuid } }),
        t.cloud("DELETE", `/v1/network/load_balancers/${lb.uuid}`),
      ]);
      expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
    }
  });
});
