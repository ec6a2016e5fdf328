import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

describe("cloud load balancers", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  const createVm = async (name: string) =>
    (await t.cloud("POST", "/v1/user-resource/vm", { form: { name } })).body;

  it("creates a load balancer with forwarding rules and VM targets", async () => {
    const vm = await createVm("backend-1");
    const created = await t.cloud("POST", "/v1/network/load_balancers", {
      json: {
        display_name: "front",
        forwarding_rules: [{ protocol: "TCP", source_port: 80, target_port: 8080 }],
        targets: [{ target_uuid: vm.uuid, target_type: "vm" }],
      },
    });
    expect(created.status).toBe(200);
    expect(created.body).toEqual({
      uuid: expect.any(String),
      display_name: "front",
      billing_account_id: expect.any(Number),
      private_address: expect.stringMatching(/^10\.0\.\d+\.\d+$/),
      user_id: expect.any(Number),
      forwarding_rules: [
        {
          uuid: expect.any(String),
          protocol: "TCP",
          source_port: 80,
          target_port: 8080,
          created_at: expect.any(String),
        },
      ],
      targets: [
        {
          target_uuid: vm.uuid,
          target_type: "vm",
          target_ip_address: vm.private_ipv4,
          created_at: expect.any(String),
        },
      ],
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(created.body.private_address).not.toBe(vm.private_ipv4);
    const got = await t.cloud("GET", `/v1/network/load_balancers/${created.body.uuid}`);
    expect(got.body).toEqual(created.body);
    const list = await t.cloud("GET", "/v1/network/load_balancers");
    expect(list.body.map((lb: { uuid: string }) => lb.uuid)).toContain(created.body.uuid);
  });

  it("accepts `rules` as the client alias and validates ports", async () => {
    const alias = await t.cloud("POST", "/v1/network/load_balancers", {
      json: { display_name: "alias", rules: [{ source_port: 443, target_port: 8443 }] },
    });
    expect(alias.status).toBe(200);
    expect(alias.body.forwarding_rules).toMatchObject([
      { protocol: "TCP", source_port: 443, target_port: 8443 },
    ]);
    for (const rule of [
      { source_port: 0, target_port: 80 },
      { source_port: 80, target_port: 65536 },
      { source_port: "x", target_port: 80 },
    ]) {
      const bad = await t.cloud("POST", "/v1/network/load_balancers", { json: { forwarding_rules: [rule] } });
      expect(bad.status).toBe(400);
      expect(bad.body.message).toBe("Invalid Request");
    }
    const duplicate = await t.cloud("POST", "/v1/network/load_balancers", {
      json: {
        forwarding_rules: [
          { source_port: 80, target_port: 8080 },
          { source_port: 80, target_port: 9090 },
        ],
      },
    });
    expect(duplicate.status).toBe(400);
    expect(duplicate.body).toEqual({
      message: "Invalid Request",
      errors: { forwarding_rules: expect.any(String) },
    });
    const unknownTarget = await t.cloud("POST", "/v1/network/load_balancers", {
      json: { targets: [{ target_uuid: "00000000-0000-4000-8000-000000000000", target_type: "vm" }] },
    });
    expect(unknownTarget.status).toBe(404);
  });

  it("manages targets and forwarding rules, renames and deletes", async () => {
    const vm = await createVm("backend-2");
    const lb = (
      await t.cloud("POST", "/v1/network/load_balancers", {
        json: { display_name: "managed", forwarding_rules: [{ source_port: 80, target_port: 80 }] },
      })
    ).body;
    const base = `/v1/network/load_balancers/${lb.uuid}`;
    const target = await t.cloud("POST", `${base}/targets`, {
      json: { target_uuid: vm.uuid, target_type: "vm" },
    });
    expect(target.status).toBe(200);
    expect(target.body).toMatchObject({
      target_uuid: vm.uuid,
      target_type: "vm",
      target_ip_address: vm.private_ipv4,
    });
    const rule = await t.cloud("POST", `${base}/forwarding_rules`, {
      json: { source_port: 8443, target_port: 443 },
    });
    expect(rule.status).toBe(200);
    expect(rule.body).toMatchObject({
      uuid: expect.any(String),
      protocol: "TCP",
      source_port: 8443,
      target_port: 443,
    });
    const dup = await t.cloud("POST", `${base}/forwarding_rules`, {
      form: { source_port: "8443", target_port: "1" },
    });
    expect(dup.status).toBe(400);
    expect(dup.body.errors).toHaveProperty("source_port");
    const renamed = await t.cloud("PATCH", base, { json: { display_name: "renamed" } });
    expect(renamed.body).toMatchObject({ display_name: "renamed" });
    expect(renamed.body.targets).toHaveLength(1);
    expect(renamed.body.forwarding_rules).toHaveLength(2);
    expect((await t.cloud("DELETE", `${base}/forwarding_rules/${rule.body.uuid}`)).body).toEqual({
      success: true,
    });
    expect((await t.cloud("DELETE", `${base}/forwarding_rules/${rule.body.uuid}`)).status).toBe(404);
    expect((await t.cloud("DELETE", `${base}/targets/${vm.uuid}`)).body).toEqual({ success: true });
    expect((await t.cloud("DELETE", `${base}/targets/${vm.uuid}`)).status).toBe(404);
    const after = await t.cloud("GET", base);
    expect(after.body.targets).toEqual([]);
    expect(after.body.forwarding_rules).toHaveLength(1);
    expect((await t.cloud("DELETE", base)).body).toEqual({ success: true });
    expect((await t.cloud("GET", base)).status).toBe(404);
    expect((await t.cloud("GET", "/v1/network/load_balancers/not-a-uuid")).status).toBe(404);
  });

  it("holds added forwarding rules and targets to the bound of a creation", async () => {
    const rules = Array.from({ length: 100 }, (_, index) => ({ source_port: index + 1, target_port: 80 }));
    const created = await t.cloud("POST", "/v1/network/load_balancers", {
      json: { forwarding_rules: rules },
    });
    expect(created.status).toBe(200);
    const path = `/v1/network/load_balancers/${created.body.uuid}`;
    const more = await t.cloud("POST", `${path}/forwarding_rules`, {
      json: { source_port: 101, target_port: 80 },
    });
    expect([more.status, more.body.message]).toEqual([
      409,
      "The load balancer already has 100 forwarding rules, the most it may have",
    ]);
    const shown = await t.cloud("GET", path);
    expect(shown.body.forwarding_rules).toHaveLength(100);
    // One taken away makes room for one.
    const removed = await t.cloud(
      "DELETE",
      `${path}/forwarding_rules/${shown.body.forwarding_rules[0].uuid}`,
    );
    expect(removed.status).toBe(200);
    const added = await t.cloud("POST", `${path}/forwarding_rules`, {
      json: { source_port: 101, target_port: 80 },
    });
    expect(added.status).toBe(200);
  });

  it("drops a deleted VM from every load balancer, and takes floating IPs", async () => {
    const vm = await createVm("short-lived");
    const keep = await createVm("stays");
    const targets = [
      { target_uuid: vm.uuid, target_type: "vm" },
      { target_uuid: keep.uuid, target_type: "vm" },
    ];
    const one = (await t.cloud("POST", "/v1/network/load_balancers", { json: { targets } })).body;
    const two = (await t.cloud("POST", "/v1/network/load_balancers", { json: { targets } })).body;
    expect((await t.cloud("DELETE", "/v1/user-resource/vm", { form: { uuid: vm.uuid } })).status).toBe(200);
    for (const lb of [one, two]) {
      const shown = await t.cloud("GET", `/v1/network/load_balancers/${lb.uuid}`);
      expect(shown.body.targets.map((x: { target_uuid: string }) => x.target_uuid)).toEqual([keep.uuid]);
    }
    const ip = (await t.cloud("POST", "/v1/network/ip_addresses", { json: {} })).body;
    const assigned = await t.cloud("POST", `/v1/network/ip_addresses/${ip.address}/assign`, {
      json: { assigned_to: one.uuid, assigned_to_resource_type: "load_balancer" },
    });
    expect(assigned.body).toMatchObject({
      assigned_to: one.uuid,
      assigned_to_private_ip: one.private_address,
    });
    expect((await t.cloud("DELETE", `/v1/network/load_balancers/${one.uuid}`)).status).toBe(200);
    expect((await t.cloud("GET", `/v1/network/ip_addresses/${ip.address}`)).body.assigned_to).toBeNull();
  });

  it("accepts a form body: bracket notation or JSON text for rules and targets", async () => {
    const vm = await createVm("form-backend");
    const brackets = await t.cloud("POST", "/v1/network/load_balancers", {
      form: {
        display_name: "form",
        "forwarding_rules[0][source_port]": "80",
        "forwarding_rules[0][target_port]": "8080",
        "forwarding_rules[1][source_port]": "443",
        "forwarding_rules[1][target_port]": "8443",
        // A target's id in any case.
        "targets[0][target_uuid]": vm.uuid.toUpperCase(),
        "targets[0][target_type]": "vm",
      },
    });
    expect(brackets.status).toBe(200);
    expect(brackets.body.forwarding_rules.map((r: { source_port: number }) => r.source_port)).toEqual([
      80, 443,
    ]);
    expect(brackets.body.targets).toMatchObject([
      { target_uuid: vm.uuid, target_ip_address: vm.private_ipv4 },
    ]);
    // Empty brackets, as jQuery and qs write lists: each value takes its position among the key's values.
    const emptyBrackets = await t.cloud("POST", "/v1/network/load_balancers", {
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: [
        "display_name=empty-brackets",
        "rules[][source_port]=80",
        "rules[][target_port]=8080",
        "rules[][source_port]=443",
        "rules[][target_port]=8443",
        `targets[][target_uuid]=${vm.uuid}`,
        "targets[][target_type]=vm",
      ].join("&"),
    });
    expect(emptyBrackets.status).toBe(200);
    expect(emptyBrackets.body.forwarding_rules).toMatchObject([
      { source_port: 80, target_port: 8080 },
      { source_port: 443, target_port: 8443 },
    ]);
    expect(emptyBrackets.body.targets).toMatchObject([{ target_uuid: vm.uuid }]);
    const jsonText = await t.cloud("POST", "/v1/network/load_balancers", {
      form: { rules: JSON.stringify([{ source_port: 22, target_port: 22 }]) },
    });
    expect(jsonText.status).toBe(200);
    expect(jsonText.body.forwarding_rules).toMatchObject([{ source_port: 22, target_port: 22 }]);
    const badPort = await t.cloud("POST", "/v1/network/load_balancers", {
      form: { "rules[0][source_port]": "eighty", "rules[0][target_port]": "80" },
    });
    expect(badPort.status).toBe(400);
    expect(badPort.body.errors).toHaveProperty(["rules.0.source_port"]);
    // An item is named by the index it was sent under, also where the indexes leave a gap.
    const gapped = await t.cloud("POST", "/v1/network/load_balancers", {
      form: {
        "rules[0][source_port]": "80",
        "rules[0][target_port]": "80",
        "rules[3][source_port]": "0",
        "rules[3][target_port]": "80",
        "targets[1][target_uuid]": vm.uuid,
        "targets[1][target_type]": "container",
      },
    });
    expect(gapped.status).toBe(400);
    expect(gapped.body.errors).toEqual({
      "rules.3.source_port": "The rules.3.source_port field must be at least 1.",
      "targets.1.target_type": "The targets.1.target_type field must be one of: vm.",
    });
  });

  it("moves a load balancer to another billing account of the organization only", async () => {
    const lb = (await t.cloud("POST", "/v1/network/load_balancers", { json: { display_name: "billed" } }))
      .body;
    const moved = await t.cloud("PUT", `/v1/network/load_balancers/${lb.uuid}/billing_account`, {
      json: { set_id: lb.billing_account_id },
    });
    expect(moved.status).toBe(200);
    expect(moved.body.billing_account_id).toBe(lb.billing_account_id);
    const other = await t.createOrganization("Billing stranger");
    const foreign = await t.cloud("PUT", `/v1/network/load_balancers/${lb.uuid}/billing_account`, {
      json: { set_id: other.billingAccountId },
    });
    expect(foreign.status).toBe(400);
    expect(foreign.body.errors).toHaveProperty("set_id");
  });

  it("hides load balancers of other organizations", async () => {
    const lb = (await t.cloud("POST", "/v1/network/load_balancers", { json: { display_name: "mine" } })).body;
    const other = await t.createOrganization("LB neighbour");
    expect((await t.cloud("GET", `/v1/network/load_balancers/${lb.uuid}`, { key: other.key })).status).toBe(
      404,
    );
    expect(
      (await t.cloud("DELETE", `/v1/network/load_balancers/${lb.uuid}`, { key: other.key })).status,
    ).toBe(404);
    const vm = await createVm("mine-vm");
    const theirLb = (
      await t.cloud("POST", "/v1/network/load_balancers", {
        key: other.key,
        json: { display_name: "theirs" },
      })
    ).body;
    const steal = await t.cloud("POST", `/v1/network/load_balancers/${theirLb.uuid}/targets`, {
      key: other.key,
      json: { target_uuid: vm.uuid, target_type: "vm" },
    });
    expect(steal.status).toBe(404);
  });
  it("never leaves a target or an address on a VM deleted at the same moment", async () => {
    const lb = (
      await t.cloud("POST", "/v1/network/load_balancers", {
        json: { display_name: "race", forwarding_rules: [{ source_port: 80, target_port: 80 }] },
      })
    ).body;
    for (let round = 0; round < 8; round++) {
      const vm = await createVm(`race-${round}`);
      const ip = (await t.cloud("POST", "/v1/network/ip_addresses", { json: {} })).body;
      const [deleted, targeted, assigned] = await Promise.all([
        t.cloud("DELETE", "/v1/user-resource/vm", { form: { uuid: vm.uuid } }),
        t.cloud("POST", `/v1/network/load_balancers/${lb.uuid}/targets`, {
          json: { target_uuid: vm.uuid, target_type: "vm" },
        }),
        t.cloud("POST", `/v1/network/ip_addresses/${ip.address}/assign`, {
          json: { assigned_to: vm.uuid, assigned_to_resource_type: "virtual_machine" },
        }),
      ]);
      expect(deleted.status).toBe(200);
      // Either order is fine; what the other call did before the deletion is undone by it.
      // A 404 must be the deleted VM's, not any other reason.
      for (const answer of [targeted, assigned]) {
        if (answer.status !== 200) expect(answer.body.message).toBe("Virtual machine not found");
      }
      expect([200, 404]).toContain(targeted.status);
      expect([200, 404]).toContain(assigned.status);
      const now = (await t.cloud("GET", `/v1/network/load_balancers/${lb.uuid}`)).body;
      expect(now.targets.map((target: { target_uuid: string }) => target.target_uuid)).not.toContain(vm.uuid);
      expect((await t.cloud("GET", `/v1/network/ip_addresses/${ip.address}`)).body.assigned_to).toBeNull();
    }
  });

  it("answers 404, never 500, when a load balancer is deleted while it is being changed", async () => {
    for (let round = 0; round < 6; round++) {
      const vm = await createVm(`gone-${round}`);
      const lb = (
        await t.cloud("POST", "/v1/network/load_balancers", {
          json: { display_name: "gone", forwarding_rules: [{ source_port: 80, target_port: 80 }] },
        })
      ).body;
      const base = `/v1/network/load_balancers/${lb.uuid}`;
      const [deleted, targeted, ruled] = await Promise.all([
        t.cloud("DELETE", base),
        t.cloud("POST", `${base}/targets`, { json: { target_uuid: vm.uuid, target_type: "vm" } }),
        t.cloud("POST", `${base}/forwarding_rules`, { json: { source_port: 443, target_port: 443 } }),
      ]);
      expect(deleted.status).toBe(200);
      expect([200, 404]).toContain(targeted.status);
      expect([200, 404]).toContain(ruled.status);
      for (const answer of [targeted, ruled]) {
        if (answer.status !== 200) expect(answer.body.message).toBe("Load balancer not found");
      }
      expect((await t.cloud("GET", base)).status).toBe(404);
    }
  });
});
