import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

/** Every schema below `schema` (the schema itself included), with its JSON path. */
function* schemasIn(schema: unknown, path: string): Generator<[string, Record<string, unknown>]> {
  if (typeof schema !== "object" || schema === null) return;
  if (Array.isArray(schema)) {
    for (const [index, item] of schema.entries()) yield* schemasIn(item, `${path}[${index}]`);
    return;
  }
  yield [path, schema as Record<string, unknown>];
  for (const [key, value] of Object.entries(schema)) yield* schemasIn(value, `${path}.${key}`);
}

// A body of a megabyte can hold a quarter of a million empty objects. Without a bound on every list
// and map, or with each member of an over-long list checked and reported, one such request held the
// event loop for seconds and was answered with tens of megabytes of errors (QA of 4 December).
describe("lists and maps far over their bounds", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it("are refused for their length alone, in one short answer", async () => {
    const rules = Array.from({ length: 200_000 }, () => ({}));
    const balancer = await t.cloud("POST", "/v1/network/load_balancers", { json: { rules } });
    expect(balancer.status).toBe(400);
    expect(balancer.body).toEqual({
      message: "Invalid Request",
      errors: { rules: "The rules field must have at most 100 items." },
    });
    const vm = await t.cloud("POST", "/v1/user-resource/vm", {
      json: { name: "vm", public_keys: Array.from({ length: 200_000 }, () => 1) },
    });
    expect(vm.status).toBe(400);
    expect(Object.keys(vm.body.errors)).toEqual(["public_keys"]);

    const library = await t.request("POST", "/v1/media/libraries", { json: { name: "bounds" } });
    const security = await t.request("PUT", `/v1/media/libraries/${library.body.data.id}/security`, {
      json: {
        referrers: { action: "allow", values: Array.from({ length: 200_000 }, () => 5), enabled: true },
      },
    });
    expect(security.status).toBe(400);
    expect(security.body.errors).toEqual([
      {
        field: "referrers.values",
        code: "validation_max",
        message: "The referrers.values field must have at most 100 items.",
      },
    ]);
    const headers = Object.fromEntries(Array.from({ length: 50_000 }, (_, index) => [`h${index}`, index]));
    const endpoint = await t.request("POST", `/v1/media/libraries/${library.body.data.id}/webhooks`, {
      json: { name: "hook", events: ["*"], url: "https://hooks.example.com/in", headers },
    });
    expect(endpoint.status).toBe(400);
    expect(endpoint.body.errors).toEqual([
      expect.objectContaining({ field: "headers", code: "validation_max" }),
    ]);
  });

  it("still have each member checked within their bounds", async () => {
    const balancer = await t.cloud("POST", "/v1/network/load_balancers", {
      json: { rules: [{ source_port: 80, target_port: 8080 }, {}] },
    });
    expect(balancer.status).toBe(400);
    expect(Object.keys(balancer.body.errors).sort()).toEqual(["rules.1.source_port", "rules.1.target_port"]);
    const headers = { "X-Good": "yes", "X-Bad": 5 };
    const library = await t.request("POST", "/v1/media/libraries", { json: { name: "members" } });
    const endpoint = await t.request("POST", `/v1/media/libraries/${library.body.data.id}/webhooks`, {
      json: { name: "hook", events: ["*"], url: "https://hooks.example.com/in", headers },
    });
    expect(endpoint.status).toBe(400);
    expect(endpoint.body.errors).toEqual([
      expect.objectContaining({ field: "headers.X-Bad", code: "validation_type" }),
    ]);
  });

  it("exist for every list and map a request body may hold", async () => {
    const document = (await t.request("GET", "/openapi.json", { anonymous: true })).body as {
      paths: Record<
        string,
        Record<string, { requestBody?: { content: Record<string, { schema: unknown }> } }>
      >;
    };
    const unbounded: string[] = [];
    for (const [route, operations] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        for (const [type, { schema }] of Object.entries(operation.requestBody?.content ?? {})) {
          // A multipart file is its own bytes, bounded by the upload limits.
          if (type.startsWith("multipart/")) continue;
          for (const [path, node] of schemasIn(schema, `${method.toUpperCase()} ${route} ${type}`)) {
            if (node.type === "array" && typeof node.maxItems !== "number") unbounded.push(path);
            const isMap =
              node.patternProperties !== undefined || typeof node.additionalProperties === "object";
            if (isMap && typeof node.maxProperties !== "number") unbounded.push(path);
          }
        }
      }
    }
    expect(unbounded).toEqual([]);
  });
});
