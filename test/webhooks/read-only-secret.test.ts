import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

/** Read-only keys never see signing secrets (docs/security.md, "Read-only keys and secrets"). */
describe("webhook endpoint secret and read-only keys", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" });
  });
  afterAll(() => t.close());

  it("answers the secret as null and masks header values for a read-only key, in the endpoint, the list and the deliveries", async () => {
    const org = await t.createOrganization("Hooked");
    const created = await t.cumulo.services.identity.createApiKey(org.organizationId, {
      name: "ro",
      readOnly: true,
    });
    if (created.outcome !== "created") throw new Error("key not created");
    const readOnly = created.api_key;
    const library = (await t.request("POST", "/v1/media/libraries", { key: org.key, json: { name: "L" } }))
      .body.data;
    const path = `/v1/media/libraries/${library.id}/webhooks`;
    const endpoint = (
      await t.request("POST", path, {
        key: org.key,
        json: {
          name: "Primary",
          url: "https://hooks.example.com/in",
          events: ["*"],
          headers: { Authorization: "Bearer receiver-secret", "X-Tenant": "42" },
        },
      })
    ).body.data;
    expect(endpoint.secret).toMatch(/^whsec_/);

    const one = await t.request("GET", `${path}/${endpoint.id}`, { key: readOnly });
    expect(one.status).toBe(200);
    const masked = { ...endpoint, secret: null, headers: { Authorization: "***", "X-Tenant": "***" } };
    expect(one.body.data).toEqual(masked);
    const list = await t.request("GET", path, { key: readOnly });
    expect(list.body.data).toEqual([masked]);
    expect((await t.request("GET", `${path}/${endpoint.id}`, { key: org.key })).body.data).toEqual(endpoint);

    const queued = await t.request("POST", `${path}/${endpoint.id}/test`, { key: org.key });
    expect(queued.status).toBe(202);
    // The test send is attempted by the worker; wait for its record, then read it with each key.
    await expect
      .poll(
        async () =>
          (await t.request("GET", `${path}/${endpoint.id}/events`, { key: org.key })).body.data.length,
      )
      .toBeGreaterThan(0);
    const asAdmin = (await t.request("GET", `${path}/${endpoint.id}/events`, { key: org.key })).body.data;
    expect(asAdmin[0].webhook_endpoint.secret).toBe(endpoint.secret);
    const asReader = (await t.request("GET", `${path}/${endpoint.id}/events`, { key: readOnly })).body.data;
    expect(asReader[0].webhook_endpoint.secret).toBeNull();
    expect(asReader[0].webhook_endpoint.headers).toEqual(masked.headers);
  });

  it("masks credentials in the endpoint URL's query for a read-only key, the rest of the URL as written", async () => {
    const org = await t.createOrganization("Hooked by URL");
    const created = await t.cumulo.services.identity.createApiKey(org.organizationId, {
      name: "ro",
      readOnly: true,
    });
    if (created.outcome !== "created") throw new Error("key not created");
    const library = (await t.request("POST", "/v1/media/libraries", { key: org.key, json: { name: "L" } }))
      .body.data;
    const path = `/v1/media/libraries/${library.id}/webhooks`;
    // A receiver that checks a token in its URL (as many do) rather than the signature.
    const url = "https://hooks.example.com/in?token=receiver-secret&tenant=42#part";
    const endpoint = (
      await t.request("POST", path, { key: org.key, json: { name: "By URL", url, events: ["*"] } })
    ).body.data;
    expect(endpoint.url).toBe(url);

    const shown = "https://hooks.example.com/in?token=***&tenant=42#part";
    const one = await t.request("GET", `${path}/${endpoint.id}`, { key: created.api_key });
    expect(one.body.data.url).toBe(shown);
    expect((await t.request("GET", path, { key: created.api_key })).body.data[0].url).toBe(shown);
    expect(one.text).not.toContain("receiver-secret");
    expect((await t.request("GET", `${path}/${endpoint.id}`, { key: org.key })).body.data.url).toBe(url);
  });
});
