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
