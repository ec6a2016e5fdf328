import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { BLANK_TEXTS } from "../support/blank-text.ts";

describe("cloud VMs, disks and attachment", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  const createVm = async (name: string, extra: Record<string, string> = {}) => {
    const response = await t.cloud("POST", "/v1/user-resource/vm", { form: { name, ...extra } });
    expect(response.status).toBe(200);
    return response.body;
  };
  const createDisk = async (size = "10") => {
    const response = await t.cloud("POST", "/v1/storage/disks", { form: { size_gb: size } });
    expect(response.status).toBe(200);
    return response.body;
  };

  it("creates a VM from a form, never returning or storing the password", async () => {
    const vm = await createVm("web server 1", {
      vcpu: "2",
      ram: "2048",
      disks: "30",
      os_name: "debian",
      os_version: "12",
      username: "admin",
      password: "correct horse battery",
      description: "front",
      reserve_public_ip: "0",
    });
    expect(vm).toEqual({
      uuid: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: "web server 1",
      status: "running",
      vcpu: 2,
      memory: 2048,
      hostname: "web-server-1",
      mac: expect.stringMatching(/^52:54:00(:[0-9a-f]{2}){3}$/),
      os_name: "debian",
      os_version: "12",
      private_ipv4: expect.stringMatching(/^10\.0\.\d+\.\d+$/),
      username: "admin",
      description: "front",
      billing_account: expect.any(Number),
      user_id: expect.any(Number),
      storage: [
        {
          uuid: expect.any(String),
          name: "vda",
          size: 30,
          primary: true,
          created_at: expect.any(String),
          user_id: expect.any(Number),
        },
      ],
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const row = await t.cumulo.store.db
      .selectFrom("cloud_vms")
      .select("password_hash")
      .where("uuid", "=", vm.uuid)
      .executeTakeFirstOrThrow();
    expect(row.password_hash).toMatch(/^scrypt\$/);
    expect(row.password_hash).not.toContain("correct horse");
  });

  it("creates a VM from JSON with a public address, and validates fields", async () => {
    const json = await t.cloud("POST", "/v1/user-resource/vm", {
      json: { name: "api", vcpu: 1, ram: 1024, disks: 10, reserve_public_ip: true },
    });
    expect(json.status).toBe(200);
    expect(json.body.public_ipv4).toMatch(/^203\.0\.113\.\d+$/);
    const missing = await t.cloud("POST", "/v1/user-resource/vm", { form: { vcpu: "abc" } });
    expect(missing.status).toBe(400);
    expect(missing.body.message).toBe("Invalid Request");
    expect(Object.keys(missing.body.errors).sort()).toEqual(["name", "vcpu"]);
    const tooSmall = await t.cloud("POST", "/v1/user-resource/vm", { json: { name: "x", ram: 64 } });
    expect(tooSmall.status).toBe(400);
    expect(tooSmall.body.errors).toHaveProperty("ram");
  });

  it("refuses a blank VM name, form or JSON, on create and rename; blank display names stay optional", async () => {
    const vm = await createVm(" Spaced ");
    expect(vm).toMatchObject({ name: " Spaced ", hostname: "spaced" });
    const before = (await t.cloud("GET", "/v1/user-resource/vm/list")).body.length;
    const refusal = { message: "Invalid Request", errors: { name: "The name field must not be empty." } };
    for (const name of BLANK_TEXTS) {
      for (const body of [{ form: { name } }, { json: { name } }]) {
        const created = await t.cloud("POST", "/v1/user-resource/vm", body);
        expect(created.status).toBe(400);
        expect(created.body).toEqual(refusal);
      }
      const renamed = await t.cloud("PATCH", "/v1/user-resource/vm", { form: { uuid: vm.uuid, name } });
      expect(renamed.status).toBe(400);
      expect(renamed.body).toEqual(refusal);
    }
    expect((await t.cloud("GET", "/v1/user-resource/vm/list")).body.length).toBe(before);
    expect((await t.cloud("GET", `/v1/user-resource/vm?uuid=${vm.uuid}`)).body.name).toBe(" Spaced ");
    // Display names are optional in the provider's API (empty by default): blank ones are kept.
    const disk = await t.cloud("POST", "/v1/storage/disks", { form: { size_gb: "1", display_name: "  " } });
    expect(disk.status).toBe(200);
    expect(disk.body.display_name).toBe("  ");
  });

  it("gets, lists, stops, resizes, starts and renames a VM", async () => {
    const vm = await createVm("lifecycle");
    const got = await t.cloud("GET", `/v1/user-resource/vm?uuid=${vm.uuid}`);
    expect(got.status).toBe(200);
    expect(got.body.uuid).toBe(vm.uuid);
    const list = await t.cloud("GET", "/v1/user-resource/vm/list");
    expect(list.body.map((row: { uuid: string }) => row.uuid)).toContain(vm.uuid);
    const running = await t.cloud("PATCH", "/v1/user-resource/vm", { form: { uuid: vm.uuid, ram: "2048" } });
    expect(running.status).toBe(200);
    expect(running.body).toMatchObject({ memory: 2048, status: "running" });
    const badRam = await t.cloud("PATCH", "/v1/user-resource/vm", { json: { uuid: vm.uuid, ram: "lots" } });
    expect(badRam.status).toBe(400);
    expect(badRam.body.errors).toHaveProperty("ram");
    const stopped = await t.cloud("POST", "/v1/user-resource/vm/stop", { form: { uuid: vm.uuid } });
    expect(stopped.status).toBe(200);
    expect(stopped.body.status).toBe("stopped");
    const resized = await t.cloud("PATCH", "/v1/user-resource/vm", {
      form: { uuid: vm.uuid, ram: "4096", vcpu: "4", name: "renamed" },
    });
    expect(resized.status).toBe(200);
    expect(resized.body).toMatchObject({ memory: 4096, vcpu: 4, name: "renamed", hostname: "renamed" });
    const started = await t.cloud("POST", "/v1/user-resource/vm/start", { json: { uuid: vm.uuid } });
    expect(started.body.status).toBe("running");
    for (const uuid of ["00000000-0000-4000-8000-000000000000", "not-a-uuid"]) {
      const missing = await t.cloud("GET", `/v1/user-resource/vm?uuid=${uuid}`);
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual({
        message: "Virtual machine not found",
        errors: { Error: "Virtual machine not found" },
      });
    }
  });

  it("charges a VM to another billing account of the organization only", async () => {
    const vm = await createVm("billed");
    const own = await t.cloud("PATCH", "/v1/user-resource/vm", {
      form: { uuid: vm.uuid, billing_account_id: String(vm.billing_account) },
    });
    expect(own.status).toBe(200);
    expect(own.body.billing_account).toBe(vm.billing_account);
    const other = await t.createOrganization("VM billing stranger");
    for (const billingAccountId of [other.billingAccountId, 999_999]) {
      // Before: the field was not in the schema and was dropped, the VM answered unchanged with 200.
      const foreign = await t.cloud("PATCH", "/v1/user-resource/vm", {
        json: { uuid: vm.uuid, billing_account_id: billingAccountId, name: "moved" },
      });
      expect(foreign.status).toBe(400);
      expect(foreign.body.errors).toEqual({
        billing_account_id: "The billing_account_id field must name a billing account of your organization.",
      });
    }
    const after = await t.cloud("GET", `/v1/user-resource/vm?uuid=${vm.uuid}`);
    expect(after.body).toMatchObject({ name: "billed", billing_account: vm.billing_account });
  });

  it("creates, lists, gets, updates and deletes disks", async () => {
    const disk = await createDisk("25");
    expect(disk).toEqual({
      uuid: expect.any(String),
      user_id: expect.any(Number),
      billing_account_id: expect.any(Number),
      status: "Active",
      size_gb: 25,
      display_name: "",
      source_image_type: "EMPTY",
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    for (const size of ["0", "16385", "ten"]) {
      const bad = await t.cloud("POST", "/v1/storage/disks", { form: { size_gb: size } });
      expect(bad.status).toBe(400);
      expect(bad.body.errors).toHaveProperty("size_gb");
    }
    const json = await t.cloud("POST", "/v1/storage/disks", { json: { size_gb: 5, display_name: "data" } });
    expect(json.body.display_name).toBe("data");
    const list = await t.cloud("GET", "/v1/storage/disks");
    expect(list.body.map((row: { uuid: string }) => row.uuid)).toEqual(
      expect.arrayContaining([disk.uuid, json.body.uuid]),
    );
    const got = await t.cloud("GET", `/v1/storage/disks/${disk.uuid}`);
    expect(got.body).toEqual(disk);
    const patched = await t.cloud("PATCH", `/v1/storage/disks/${disk.uuid}`, {
      form: { display_name: "renamed", size_gb: "30" },
    });
    expect(patched.body).toMatchObject({ display_name: "renamed", size_gb: 30 });
    const shrink = await t.cloud("PATCH", `/v1/storage/disks/${disk.uuid}`, { json: { size_gb: 1 } });
    expect(shrink.status).toBe(400);
    const deleted = await t.cloud("DELETE", `/v1/storage/disks/${disk.uuid}`);
    expect(deleted.body).toEqual({ success: true });
    expect((await t.cloud("GET", `/v1/storage/disks/${disk.uuid}`)).status).toBe(404);
    expect((await t.cloud("GET", "/v1/storage/disks/not-a-uuid")).status).toBe(404);
  });

  it("reads integers sent as text in a JSON body, as in a form, and still refuses other text", async () => {
    const disk = await t.cloud("POST", "/v1/storage/disks", { json: { size_gb: "5" } });
    expect(disk.status).toBe(200);
    expect(disk.body.size_gb).toBe(5);
    const vm = await t.cloud("POST", "/v1/user-resource/vm", {
      json: { name: "texty", vcpu: "2", ram: "2048", reserve_public_ip: "0" },
    });
    expect(vm.status).toBe(200);
    expect(vm.body).toMatchObject({ vcpu: 2, memory: 2048 });
    expect(vm.body).not.toHaveProperty("public_ipv4");
    const lb = await t.cloud("POST", "/v1/network/load_balancers", {
      json: { rules: [{ source_port: "443", target_port: "8443" }] },
    });
    expect(lb.status).toBe(200);
    expect(lb.body.forwarding_rules[0]).toMatchObject({ source_port: 443, target_port: 8443 });
    const notNumber = await t.cloud("POST", "/v1/storage/disks", { json: { size_gb: "1.5" } });
    expect(notNumber.status).toBe(400);
    expect(notNumber.body).toEqual({
      message: "Invalid Request",
      errors: { size_gb: "The size_gb field must be of type integer." },
    });
  });

  it("attaches disks with the lowest free device names and detaches them", async () => {
    const vm = await createVm("attach-host");
    const first = await createDisk("11");
    const second = await createDisk("12");
    const a = await t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
      form: { uuid: vm.uuid, storage_uuid: first.uuid },
    });
    expect(a.status).toBe(200);
    expect(a.body).toEqual({
      uuid: first.uuid,
      size: 11,
      name: "vdb",
      primary: false,
      created_at: expect.any(String),
      user_id: expect.any(Number),
    });
    const b = await t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
      json: { uuid: vm.uuid, storage_uuid: second.uuid },
    });
    expect(b.body.name).toBe("vdc");
    const shown = await t.cloud("GET", `/v1/user-resource/vm?uuid=${vm.uuid}`);
    expect(shown.body.storage.map((s: { name: string }) => s.name)).toEqual(["vda", "vdb", "vdc"]);
    // attached disks cannot be deleted or attached again; the refusal names the VM, which the
    // disk's own fields do not show
    const deleted = await t.cloud("DELETE", `/v1/storage/disks/${first.uuid}`);
    expect([deleted.status, deleted.body.message]).toEqual([
      409,
      `Disk is attached to virtual machine ${vm.uuid}; detach it first`,
    ]);
    const other = await createVm("other-host");
    const twice = await t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
      form: { uuid: other.uuid, storage_uuid: first.uuid },
    });
    expect([twice.status, twice.body.message]).toEqual([
      409,
      `Disk is already attached to virtual machine ${vm.uuid}`,
    ]);
    // detach vdb, then a new attach takes vdb again
    const detached = await t.cloud("POST", "/v1/user-resource/vm/storage/detach", {
      form: { uuid: vm.uuid, storage_uuid: first.uuid },
    });
    expect(detached.body).toEqual({ success: true });
    const again = await t.cloud("POST", "/v1/user-resource/vm/storage/detach", {
      form: { uuid: vm.uuid, storage_uuid: first.uuid },
    });
    expect(again.status).toBe(409);
    const third = await createDisk("13");
    const reuse = await t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
      form: { uuid: vm.uuid, storage_uuid: third.uuid },
    });
    expect(reuse.body.name).toBe("vdb");
    // unknown VM or disk
    const unknownVm = await t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
      form: { uuid: "00000000-0000-4000-8000-000000000000", storage_uuid: first.uuid },
    });
    expect(unknownVm.status).toBe(404);
    const unknownDisk = await t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
      form: { uuid: vm.uuid, storage_uuid: "nope" },
    });
    expect(unknownDisk.status).toBe(404);
    expect(unknownDisk.body.errors.Error).toBe("Disk not found");
    const missing = await t.cloud("POST", "/v1/user-resource/vm/storage/attach", { form: { uuid: vm.uuid } });
    expect(missing.status).toBe(400);
    expect(missing.body.errors).toHaveProperty("storage_uuid");
  });

  it("matches ids in bodies without regard to case, and reads a form whatever the case of its type", async () => {
    const vm = await createVm("case-host");
    const disk = await t.cloud("POST", "/v1/storage/disks", {
      body: "size_gb=14",
      headers: { "content-type": "Application/X-WWW-Form-Urlencoded" },
    });
    expect(disk.status, disk.text).toBe(200);
    expect(disk.body.size_gb).toBe(14);
    const attached = await t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
      form: { uuid: vm.uuid.toUpperCase(), storage_uuid: disk.body.uuid.toUpperCase() },
    });
    expect(attached.status, attached.text).toBe(200);
    expect(attached.body.uuid).toBe(disk.body.uuid);
    const detached = await t.cloud("POST", "/v1/user-resource/vm/storage/detach", {
      json: { uuid: vm.uuid.toUpperCase(), storage_uuid: disk.body.uuid.toUpperCase() },
    });
    expect(detached.body).toEqual({ success: true });
  });

  it("lets exactly one of concurrent attaches of one disk win", async () => {
    const disk = await createDisk("3");
    const vms = await Promise.all([1, 2, 3, 4, 5].map((n) => createVm(`race-${n}`)));
    const results = await Promise.all(
      vms.map((vm) =>
        t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
          form: { uuid: vm.uuid, storage_uuid: disk.uuid },
        }),
      ),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409, 409, 409]);
  });

  it("gives concurrent attaches to one VM distinct device names", async () => {
    const vm = await createVm("many-disks");
    const disks = await Promise.all([1, 2, 3, 4, 5, 6].map(() => createDisk("1")));
    const results = await Promise.all(
      disks.map((disk) =>
        t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
          form: { uuid: vm.uuid, storage_uuid: disk.uuid },
        }),
      ),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(results.map((r) => r.body.name).sort()).toEqual(["vdb", "vdc", "vdd", "vde", "vdf", "vdg"]);
  });

  it("deletes a VM: data disks are detached and kept, addresses released", async () => {
    const vm = await createVm("doomed", { reserve_public_ip: "true" });
    const disk = await createDisk("2");
    await t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
      form: { uuid: vm.uuid, storage_uuid: disk.uuid },
    });
    const deleted = await t.cloud("DELETE", "/v1/user-resource/vm", { form: { uuid: vm.uuid } });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ success: true });
    expect((await t.cloud("GET", `/v1/user-resource/vm?uuid=${vm.uuid}`)).status).toBe(404);
    expect((await t.cloud("DELETE", "/v1/user-resource/vm", { form: { uuid: vm.uuid } })).status).toBe(404);
    expect((await t.cloud("DELETE", `/v1/storage/disks/${disk.uuid}`)).status).toBe(200);
    const ip = await t.cloud("GET", `/v1/network/ip_addresses/${vm.public_ipv4}`);
    expect(ip.body.assigned_to).toBeNull();
  });

  it("deletes a VM named in the query or a JSON body; none named is a validation error", async () => {
    const byQuery = await createVm("query");
    expect((await t.cloud("DELETE", `/v1/user-resource/vm?uuid=${byQuery.uuid}`)).body).toEqual({
      success: true,
    });
    const byJson = await createVm("json");
    expect((await t.cloud("DELETE", "/v1/user-resource/vm", { json: { uuid: byJson.uuid } })).status).toBe(
      200,
    );
    const none = await t.cloud("DELETE", "/v1/user-resource/vm");
    expect(none.status).toBe(400);
    expect(none.body).toEqual({
      message: "Invalid Request",
      errors: { uuid: "The uuid field is required." },
    });
  });

  it("hides VMs and disks of other organizations", async () => {
    const vm = await createVm("private");
    const disk = await createDisk("4");
    const other = await t.createOrganization("VM neighbour");
    expect((await t.cloud("GET", `/v1/user-resource/vm?uuid=${vm.uuid}`, { key: other.key })).status).toBe(
      404,
    );
    expect((await t.cloud("GET", `/v1/storage/disks/${disk.uuid}`, { key: other.key })).status).toBe(404);
    const list = await t.cloud("GET", "/v1/user-resource/vm/list", { key: other.key });
    expect(list.body).toEqual([]);
    const theirs = await t.cloud("POST", "/v1/user-resource/vm", {
      key: other.key,
      form: { name: "theirs" },
    });
    const attach = await t.cloud("POST", "/v1/user-resource/vm/storage/attach", {
      key: other.key,
      form: { uuid: theirs.body.uuid, storage_uuid: disk.uuid },
    });
    expect(attach.status).toBe(404);
    expect(
      (await t.cloud("DELETE", "/v1/user-resource/vm", { key: other.key, form: { uuid: vm.uuid } })).status,
    ).toBe(404);
  });
});
