import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

// Section 10 of the contract: the limits are defaults, and an operator can change them.
describe("configured limits", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_MAX_PURGE_PATHS: "2", CUMULO_MAX_SECURITY_VALUES: "2" });
  });
  afterAll(() => t.close());

  it("holds purges and security rules to the configured number of entries", async () => {
    const distribution = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname: `limits-${Date.now()}.example.test`, origin_url: "https://origin.example.com" },
    });
    expect(distribution.status, distribution.text).toBe(201);
    const purges = `/v1/cdn/distributions/${distribution.body.data.id}/purges`;
    expect((await t.request("POST", purges, { json: { paths: ["/a", "/b"] } })).status).toBe(200);
    const tooMany = await t.request("POST", purges, { json: { paths: ["/a", "/b", "/c"] } });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.errors).toEqual([
      expect.objectContaining({ field: "paths", code: "validation_max" }),
    ]);

    const library = await t.request("POST", "/v1/media/libraries", { json: { name: "limits" } });
    const security = `/v1/media/libraries/${library.body.data.id}/security`;
    const two = await t.request("PUT", security, {
      json: { countries: { action: "deny", values: ["DE", "FR"] } },
    });
    expect(two.status).toBe(200);
    const three = await t.request("PUT", security, {
      json: { referrers: { action: "allow", values: ["a.com", "b.com", "c.com"] } },
    });
    expect(three.status).toBe(400);
    expect(three.body.errors).toEqual([
      expect.objectContaining({ field: "referrers.values", code: "validation_max" }),
    ]);
  });
});
