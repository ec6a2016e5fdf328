import { validate } from "@readme/openapi-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

describe("operational endpoints and conventions", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it("answers /healthz and /readyz without a key", async () => {
    const health = await t.request("GET", "/healthz", { anonymous: true });
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ status: "ok" });
    const ready = await t.request("GET", "/readyz", { anonymous: true });
    expect(ready.status).toBe(200);
  });

  it("echoes a given X-Request-Id and generates one otherwise", async () => {
    const echoed = await t.request("GET", "/healthz", { headers: { "x-request-id": "trace-123" } });
    expect(echoed.headers.get("x-request-id")).toBe("trace-123");
    const generated = await t.request("GET", "/healthz");
    expect(generated.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const unsafe = await t.request("GET", "/healthz", { headers: { "x-request-id": "bad id with spaces" } });
    expect(unsafe.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("answers unknown media routes with the media 404 body and unknown cloud routes with the gateway body", async () => {
    const media = await t.request("GET", "/v1/media/nothing-here");
    expect(media.status).toBe(404);
    expect(media.body).toEqual({ success: false, message: "Resource not found" });
    const cloud = await t.cloud("GET", "/v1/network/nothing-here");
    expect(cloud.status).toBe(404);
    expect(cloud.body).toEqual({ message: "no route and no API found with those values" });
  });

  it("serves a valid OpenAPI 3.1 document and a reference page", async () => {
    const doc = await t.request("GET", "/openapi.json", { anonymous: true });
    expect(doc.status).toBe(200);
    expect(doc.body.openapi).toBe("3.1.0");
    expect(doc.body.paths["/v1/livestream/health"]).toBeDefined();
    const result = await validate(structuredClone(doc.body));
    expect(result.valid, JSON.stringify(result)).toBe(true);
    const page = await t.request("GET", "/docs", { anonymous: true });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
  });
});

describe("bootstrap without a configured key", () => {
  it("generates an admin key on the first start only, and it works", async () => {
    const first = await startTestApp({ CUMULO_BOOTSTRAP_API_KEY: "" });
    try {
      const key = first.cumulo.generatedKey;
      expect(key).toMatch(/^cmk_[A-Za-z0-9_-]{43}$/);
      const health = await first.request("GET", "/v1/livestream/health", { key: key ?? "" });
      expect(health.status).toBe(200);
      const again = await first.cumulo.services.identity.ensureBootstrap(undefined);
      expect(again.generatedKey).toBeUndefined();
    } finally {
      await first.close();
    }
  });
});
