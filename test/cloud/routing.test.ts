import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

const NO_ROUTE = { message: "no route and no API found with those values" };

describe("cloud routing: prefixes and locations", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_LOCATIONS: "local-1,local-2" });
  });
  afterAll(() => t.close());

  it("answers every route under /v1, /v1/cloud, with and without a location", async () => {
    for (const prefix of ["/v1", "/v1/cloud", "/v1/local-1", "/v1/cloud/local-1"]) {
      const locations = await t.cloud("GET", `${prefix}/config/locations`);
      expect(locations.status).toBe(200);
      expect(locations.body.map((l: { slug: string }) => l.slug)).toEqual(["local-1", "local-2"]);
      expect((await t.cloud("GET", `${prefix}/storage/user`)).status).toBe(200);
      const disk = await t.cloud("POST", `${prefix}/storage/disks`, { form: { size_gb: "1" } });
      expect(disk.status).toBe(200);
      const got = await t.cloud("GET", `${prefix}/storage/disks/${disk.body.uuid}`);
      expect(got.status).toBe(200);
    }
  });

  it("answers the gateway 404 for an unknown location slug, even without a key", async () => {
    for (const path of [
      "/v1/nowhere/storage/disks",
      "/v1/cloud/nowhere/network/load_balancers",
      "/v1/mars/config/locations",
      `/v1/${"a".repeat(101)}/storage/disks`,
    ]) {
      const response = await t.cloud("GET", path);
      expect(response.status).toBe(404);
      expect(response.body).toEqual(NO_ROUTE);
      const anonymous = await t.cloud("GET", path, { anonymous: true });
      expect(anonymous.status).toBe(404);
    }
    const unknownRoute = await t.cloud("GET", "/v1/network/nothing-here");
    expect(unknownRoute.body).toEqual(NO_ROUTE);
  });

  it("keeps each location's resources and pools apart; the default location is the first", async () => {
    const vm = await t.cloud("POST", "/v1/local-2/user-resource/vm", { form: { name: "far" } });
    expect(vm.status).toBe(200);
    expect(vm.body.private_ipv4).toMatch(/^10\.1\./);
    expect((await t.cloud("GET", `/v1/local-2/user-resource/vm?uuid=${vm.body.uuid}`)).status).toBe(200);
    expect((await t.cloud("GET", `/v1/user-resource/vm?uuid=${vm.body.uuid}`)).status).toBe(404);
    expect((await t.cloud("GET", `/v1/local-1/user-resource/vm?uuid=${vm.body.uuid}`)).status).toBe(404);
    const near = await t.cloud("POST", "/v1/user-resource/vm", { form: { name: "near" } });
    expect(near.body.private_ipv4).toMatch(/^10\.0\./);
    const ip = await t.cloud("POST", "/v1/cloud/local-2/network/ip_addresses", { json: {} });
    expect(ip.body.address).toBe("198.51.100.1");
    const list = await t.cloud("GET", "/v1/network/ip_addresses");
    expect(list.body.map((row: { address: string }) => row.address)).not.toContain("198.51.100.1");
  });

  it("answers 404 naming the resource for a malformed identifier in the path", async () => {
    const lb = await t.cloud("POST", "/v1/network/load_balancers", { json: { display_name: "lb" } });
    const cases: [string, string, string][] = [
      ["GET", "/v1/storage/disks/not-a-uuid", "Disk not found"],
      ["DELETE", "/v1/local-1/storage/disks/123", "Disk not found"],
      ["GET", "/v1/network/ip_addresses/203.0.113", "IP address not found"],
      ["POST", "/v1/cloud/network/ip_addresses/999.1.1.1/unassign", "IP address not found"],
      ["GET", "/v1/network/load_balancers/nope", "Load balancer not found"],
      ["GET", `/v1/storage/disks/${"a".repeat(101)}`, "Disk not found"],
      ["DELETE", `/v1/network/load_balancers/${lb.body.uuid}/targets/nope`, "Target not found"],
      [
        "DELETE",
        `/v1/network/load_balancers/${lb.body.uuid}/forwarding_rules/nope`,
        "Forwarding rule not found",
      ],
    ];
    for (const [method, path, message] of cases) {
      const response = await t.cloud(method, path);
      expect(response.status, path).toBe(404);
      expect(response.body, path).toEqual({ message, errors: { Error: message } });
    }
  });

  it("answers 415 for a text body and takes an empty JSON body as no body", async () => {
    const text = await t.cloud("POST", "/v1/user-resource/token", {
      body: "description=x",
      headers: { "content-type": "text/plain" },
    });
    expect(text.status).toBe(415);
    expect(text.body).toEqual({
      message: "Unsupported Media Type",
      errors: { Error: "Unsupported Media Type" },
    });
    const json = { "content-type": "application/json" };
    const keys = await t.cloud("POST", "/v1/storage/user/keys", { headers: json });
    expect(keys.status).toBe(200);
    const [account] = (await t.cloud("GET", "/v1/payment/billing_account/list")).body;
    const ip = await t.cloud("POST", "/v1/network/ip_addresses", {
      json: { billing_account_id: account.id },
    });
    expect(ip.status).toBe(200);
    const renamed = await t.cloud("PATCH", `/v1/network/ip_addresses/${ip.body.address}`, {
      headers: json,
      body: "",
    });
    expect(renamed.status).toBe(200);
    expect(
      (await t.cloud("POST", `/v1/network/ip_addresses/${ip.body.address}/unassign`, { headers: json }))
        .status,
    ).toBe(200);
    const vm = await t.cloud("POST", "/v1/user-resource/vm", { headers: json, body: " " });
    expect(vm.status).toBe(400);
    expect(vm.body.errors).toEqual({ name: "The name field is required." });
    const malformed = await t.cloud("POST", "/v1/user-resource/vm", { headers: json, body: "{x" });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ message: "Invalid Request", errors: { Error: "Invalid Request" } });
  });

  it("lists cloud routes in the OpenAPI document with the location variant", async () => {
    const doc = await t.request("GET", "/openapi.json", { anonymous: true });
    expect(doc.body.paths["/v1/network/load_balancers/{load_balancer_uuid}"]).toBeDefined();
    expect(doc.body.paths["/v1/{location}/network/load_balancers/{load_balancer_uuid}"]).toBeDefined();
  });

  it("lists every cloud route under the /v1/cloud group prefix too, sharing the route's schemas", async () => {
    type Operation = {
      operationId: string;
      tags?: string[];
      parameters?: { in: string; name: string }[];
      requestBody?: { $ref: string };
      responses: Record<string, { $ref: string }>;
    };
    const document = (await t.request("GET", "/openapi.json", { anonymous: true })).body as {
      paths: Record<string, Record<string, Operation>>;
      components: { requestBodies: Record<string, object>; responses: Record<string, object> };
    };
    const { paths } = document;
    const cloudPaths = Object.entries(paths).filter(
      ([path, item]) =>
        !path.startsWith("/v1/cloud/") &&
        Object.values(item).some((operation) => operation.tags?.some((tag) => tag.startsWith("cloud: "))),
    );
    expect(cloudPaths.length).toBeGreaterThan(40);
    const { components } = document;
    for (const [path, item] of cloudPaths) {
      const alias = paths[`/v1/cloud${path.slice("/v1".length)}`];
      expect(alias, path).toBeDefined();
      expect(Object.keys(alias ?? {}).sort(), path).toEqual(Object.keys(item).sort());
      for (const [method, operation] of Object.entries(item)) {
        const aliased = alias?.[method] as Operation;
        expect(aliased.operationId).toBe(`${operation.operationId}UnderCloudPrefix`);
        expect(aliased.parameters).toEqual(operation.parameters);
        // Body and answers are written once, in components, and both operations refer to them.
        expect(aliased.requestBody).toEqual(operation.requestBody);
        expect(aliased.responses).toEqual(operation.responses);
        if (operation.requestBody) {
          expect(operation.requestBody).toEqual({
            $ref: `#/components/requestBodies/${operation.operationId}`,
          });
          expect(components.requestBodies[operation.operationId]).toHaveProperty("content");
        }
        for (const [status, response] of Object.entries(operation.responses)) {
          const name = `${operation.operationId}_${status}`;
          expect(response).toEqual({ $ref: `#/components/responses/${name}` });
          expect(components.responses[name], name).toHaveProperty("description");
        }
      }
    }
    expect(paths["/v1/cloud/storage/user"]?.get?.operationId).toBe("getS3UserUnderCloudPrefix");
    expect(paths["/v1/cloud/{location}/network/load_balancers/{load_balancer_uuid}"]?.get?.operationId).toBe(
      "getLoadBalancerAtLocationUnderCloudPrefix",
    );
    // Every alias is a route that answers: each GET without an id answers as the route it repeats.
    for (const [path, item] of cloudPaths) {
      const params = (item.get?.parameters ?? []).filter((parameter) => parameter.in === "path");
      if (!item.get || params.some((parameter) => parameter.name !== "location")) continue;
      const concrete = path.replace("{location}", "local-1");
      const original = await t.cloud("GET", concrete);
      const aliased = await t.cloud("GET", `/v1/cloud${concrete.slice("/v1".length)}`);
      expect(aliased.status, path).toBe(original.status);
      expect(aliased.status, path).toBeLessThan(500);
    }
  });
});
