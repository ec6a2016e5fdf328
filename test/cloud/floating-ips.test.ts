import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

describe("cloud floating IPs", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  const allocate = async (body: Record<string, unknown> = {}, path = "/v1/network/ip_addresses") => {
    const response = await t.cloud("POST", path, { json: body });
    expect(response.status).toBe(200);
    return response.body;
  };

  it("filters by a billing account of the organization only", async () => {
    const ip = await allocate({ name: "billed" });
    const own = await t.cloud("GET", `/v1/network/ip_addresses?billing_account_id=${ip.billing_account_id}`);
    expect(own.status).toBe(200);
    expect(own.body.map((row: { address: string }) => row.address)).toContain(ip.address);
    const other = await t.createOrganization("IP billing stranger");
    for (const billingAccountId of [other.billingAccountId, 999_999]) {
      // Before: 200 with an empty list, where a write naming the account is a validation error.
      const foreign = await t.cloud("GET", `/v1/network/ip_addresses?billing_account_id=${billingAccountId}`);
      expect(foreign.status).toBe(400);
      expect(foreign.body.errors).toEqual({
        billing_account_id: "The billing_account_id field must name a billing account of your organization.",
      });
    }
    expect((await t.cloud("DELETE", `/v1/network/ip_addresses/${ip.address}`)).status).toBe(200);
  });

  it("allocates the lowest free address of the pool, with or without a trailing slash", async () => {
    const first = await allocate({ name: "one" });
    expect(first).toEqual({
      id: expect.any(Number),
      address: "203.0.113.1",
      name: "one",
      user_id: expect.any(Number),
      billing_account_id: expect.any(Number),
      type: "public",
      enabled: true,
      assigned_to: null,
      assigned_to_resource_type: null,
      assigned_to_private_ip: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const second = await allocate({}, "/v1/network/ip_addresses/");
    expect(second.address).toBe("203.0.113.2");
    const form = await t.cloud("POST", "/v1/network/ip_addresses", { form: { name: "form" } });
    expect(form.body.address).toBe("203.0.113.3");
    expect((await t.cloud("DELETE", "/v1/network/ip_addresses/203.0.113.1")).body).toEqual({ success: true });
    const reused = await allocate();
    expect(reused.address).toBe("203.0.113.1");
    const other = await t.createOrganization("IP neighbour");
    const theirs = await t.cloud("POST", "/v1/network/ip_addresses", { key: other.key, json: {} });
    expect(theirs.body.address).toBe("203.0.113.4");
    expect((await t.cloud("GET", "/v1/network/ip_addresses/203.0.113.4")).status).toBe(404);
    expect((await t.cloud("DELETE", "/v1/network/ip_addresses/203.0.113.1", { key: other.key })).status).toBe(
      404,
    );
  });

  it("never hands one address out twice under concurrency", async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, () => t.cloud("POST", "/v1/network/ip_addresses", { json: {} })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    const addresses = results.map((r) => r.body.address);
    expect(new Set(addresses).size).toBe(20);
  });

  it("gets, renames and lists addresses, and 404s on malformed ones", async () => {
    const ip = await allocate({ name: "before" });
    const got = await t.cloud("GET", `/v1/network/ip_addresses/${ip.address}`);
    expect(got.body).toEqual(ip);
    const renamed = await t.cloud("PATCH", `/v1/network/ip_addresses/${ip.address}`, {
      json: { name: "after" },
    });
    expect(renamed.body.name).toBe("after");
    const list = await t.cloud("GET", "/v1/network/ip_addresses");
    expect(list.body.map((row: { address: string }) => row.address)).toContain(ip.address);
    for (const bad of ["999.1.1.1", "not-an-ip", "203.0.113"]) {
      expect((await t.cloud("GET", `/v1/network/ip_addresses/${bad}`)).status).toBe(404);
    }
    expect((await t.cloud("GET", "/v1/network/ip_addresses/192.0.2.250")).status).toBe(404);
  });

  it("assigns per the rules: existing target of the named type, 409 when taken, no-op when repeated", async () => {
    const vm = (await t.cloud("POST", "/v1/user-resource/vm", { form: { name: "target" } })).body;
    const vm2 = (await t.cloud("POST", "/v1/user-resource/vm", { form: { name: "target-2" } })).body;
    const ip = await allocate();
    const path = `/v1/network/ip_addresses/${ip.address}/assign`;
    const assigned = await t.cloud("POST", path, {
      json: { assigned_to: vm.uuid, assigned_to_resource_type: "virtual_machine" },
    });
    expect(assigned.status).toBe(200);
    expect(assigned.body).toMatchObject({
      address: ip.address,
      assigned_to: vm.uuid,
      assigned_to_resource_type: "virtual_machine",
      assigned_to_private_ip: vm.private_ipv4,
    });
    const repeat = await t.cloud("POST", path, {
      form: { assigned_to: vm.uuid, assigned_to_resource_type: "virtual_machine" },
    });
    expect(repeat.status).toBe(200);
    const taken = await t.cloud("POST", path, {
      json: { assigned_to: vm2.uuid, assigned_to_resource_type: "virtual_machine" },
    });
    expect(taken.status).toBe(409);
    const shown = await t.cloud("GET", `/v1/user-resource/vm?uuid=${vm.uuid}`);
    expect(shown.body.public_ipv4).toBe(ip.address);
    const byVm = await t.cloud("GET", `/v1/network/ip_addresses?vm_uuid=${vm.uuid}`);
    expect(byVm.body.map((row: { address: string }) => row.address)).toEqual([ip.address]);
    expect((await t.cloud("DELETE", `/v1/network/ip_addresses/${ip.address}`)).status).toBe(409);
    const unassigned = await t.cloud("POST", `/v1/network/ip_addresses/${ip.address}/unassign`);
    expect(unassigned.status).toBe(200);
    expect(unassigned.body).toMatchObject({ assigned_to: null, assigned_to_resource_type: null });
    expect((await t.cloud("DELETE", `/v1/network/ip_addresses/${ip.address}`)).body).toEqual({
      success: true,
    });
  });

  it("names the address path parameter public_ipv4_address in the OpenAPI document, as SPEC.md does", async () => {
    const { paths } = (await t.request("GET", "/openapi.json", { anonymous: true })).body as {
      paths: Record<string, Record<string, { parameters?: { in: string; name: string }[] }>>;
    };
    for (const path of [
      "/v1/network/ip_addresses/{public_ipv4_address}/assign",
      "/v1/{location}/network/ip_addresses/{public_ipv4_address}/assign",
    ]) {
      const names = paths[path]?.post?.parameters?.filter((p) => p.in === "path").map((p) => p.name);
      expect(names, path).toContain("public_ipv4_address");
    }
  });

  it("refuses unknown targets, wrong types and other organizations' resources", async () => {
    const vm = (await t.cloud("POST", "/v1/user-resource/vm", { form: { name: "typed" } })).body;
    const ip = await allocate();
    const path = `/v1/network/ip_addresses/${ip.address}/assign`;
    const wrongValue = await t.cloud("POST", path, {
      json: { assigned_to: vm.uuid, assigned_to_resource_type: "vm" },
    });
    expect(wrongValue.status).toBe(400);
    expect(wrongValue.body.errors).toHaveProperty("assigned_to_resource_type");
    for (const type of ["load_balancer", "service"]) {
      const mismatch = await t.cloud("POST", path, {
        json: { assigned_to: vm.uuid, assigned_to_resource_type: type },
      });
      expect(mismatch.status).toBe(404);
    }
    const unknown = await t.cloud("POST", path, {
      json: {
        assigned_to: "00000000-0000-4000-8000-000000000000",
        assigned_to_resource_type: "virtual_machine",
      },
    });
    expect(unknown.status).toBe(404);
    const other = await t.createOrganization("Assign neighbour");
    const theirVm = (
      await t.cloud("POST", "/v1/user-resource/vm", { key: other.key, form: { name: "theirs" } })
    ).body;
    const cross = await t.cloud("POST", path, {
      json: { assigned_to: theirVm.uuid, assigned_to_resource_type: "virtual_machine" },
    });
    expect(cross.status).toBe(404);
    const missing = await t.cloud("POST", "/v1/network/ip_addresses/203.0.113.250/assign", {
      json: { assigned_to: vm.uuid, assigned_to_resource_type: "virtual_machine" },
    });
    expect(missing.status).toBe(404);
  });
});

describe("cloud address pool exhaustion", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({
      CUMULO_LOCATION_LOCAL_1_PUBLIC_POOL: "198.51.100.0/30",
      CUMULO_LOCATION_LOCAL_1_PRIVATE_POOL: "10.9.0.0/29",
    });
  });

  it("shares the private pool between VMs and load balancers without duplicates, then answers 409", async () => {
    const results = await Promise.all([
      ...[1, 2, 3, 4].map((n) => t.cloud("POST", "/v1/user-resource/vm", { form: { name: `vm-${n}` } })),
      ...[1, 2].map(() => t.cloud("POST", "/v1/network/load_balancers", { json: {} })),
    ]);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const addresses = results.map((r) => r.body.private_ipv4 ?? r.body.private_address);
    expect(new Set(addresses).size).toBe(6);
    expect(addresses.every((a: string) => /^10\.9\.0\.[1-6]$/.test(a))).toBe(true);
    const full = await t.cloud("POST", "/v1/user-resource/vm", { form: { name: "one-too-many" } });
    expect(full.status).toBe(409);
    const fullLb = await t.cloud("POST", "/v1/network/load_balancers", { json: {} });
    expect(fullLb.status).toBe(409);
    // deleting a VM frees its address for the next one
    await t.cloud("DELETE", "/v1/user-resource/vm", { form: { uuid: results[0]?.body.uuid } });
    const again = await t.cloud("POST", "/v1/user-resource/vm", { form: { name: "reuse" } });
    expect(again.status).toBe(200);
    expect(again.body.private_ipv4).toBe(results[0]?.body.private_ipv4);
  });
  afterAll(() => t.close());

  it("answers 409 once the location's pool is used up", async () => {
    const results = await Promise.all(
      [1, 2, 3, 4].map(() => t.cloud("POST", "/v1/network/ip_addresses", { json: {} })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 200, 409, 409]);
    const ok = results.filter((r) => r.status === 200).map((r) => r.body.address);
    expect(ok.sort()).toEqual(["198.51.100.1", "198.51.100.2"]);
    const conflict = results.find((r) => r.status === 409);
    expect(conflict?.body).toEqual({ message: expect.any(String), errors: { Error: expect.any(String) } });
  });
});

describe("cloud public address quota per organization (CUMULO_PUBLIC_IPS_PER_ORGANIZATION)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_PUBLIC_IPS_PER_ORGANIZATION: "3" });
  });
  afterAll(() => t.close());

  const allocate = (key?: string) =>
    t.cloud("POST", "/v1/network/ip_addresses", { json: {}, ...(key ? { key } : {}) });

  it("counts floating IPs and VMs' reserved addresses alike, per organization, exactly under concurrency", async () => {
    const tenant = await t.createOrganization("quota tenant");
    const results = await Promise.all(Array.from({ length: 6 }, () => allocate(tenant.key)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 200, 200, 409, 409, 409]);
    const refused = results.find((r) => r.status === 409);
    expect(refused?.body).toEqual({
      message: "The organization holds its quota of 3 public IP addresses in location local-1",
      errors: { Error: "The organization holds its quota of 3 public IP addresses in location local-1" },
    });
    const vm = await t.cloud("POST", "/v1/user-resource/vm", {
      key: tenant.key,
      form: { name: "wants-an-address", reserve_public_ip: "true" },
    });
    expect(vm.status).toBe(409);
    const vms = await t.cloud("GET", "/v1/user-resource/vm/list", { key: tenant.key });
    expect(vms.body).toEqual([]);

    // Another organization has a quota of its own.
    expect((await allocate()).status).toBe(200);
    // A released address makes room: a VM may reserve one again.
    const held = results.find((r) => r.status === 200)?.body.address;
    expect((await t.cloud("DELETE", `/v1/network/ip_addresses/${held}`, { key: tenant.key })).status).toBe(
      200,
    );
    const again = await t.cloud("POST", "/v1/user-resource/vm", {
      key: tenant.key,
      form: { name: "gets-one", reserve_public_ip: "true" },
    });
    expect(again.status).toBe(200);
    expect(again.body.public_ipv4).toEqual(expect.any(String));
    expect((await allocate(tenant.key)).status).toBe(409);
  });
});
