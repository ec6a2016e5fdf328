import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { resolvedOperation } from "../support/auth-matrix.ts";

/** Read-only keys create nothing and never see secrets (docs/security.md, "Read-only keys and secrets"). */
describe("cloud object storage with a read-only key", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  async function organizationWithReadOnlyKey(name: string) {
    const org = await t.createOrganization(name);
    const created = await t.cumulo.services.identity.createApiKey(org.organizationId, {
      name: "ro",
      readOnly: true,
    });
    if (created.outcome !== "created") throw new Error("key not created");
    return { admin: org.key, readOnly: created.api_key };
  }

  it("does not generate a key pair after every pair was deleted, and sees no secret", async () => {
    const { admin, readOnly } = await organizationWithReadOnlyKey("Revoked keys");
    const user = (await t.cloud("GET", "/v1/storage/user", { key: admin })).body;
    for (const key of user.s3Credentials) {
      await t.cloud("DELETE", "/v1/storage/user/keys", { key: admin, form: { access_key: key.accessKey } });
    }

    const seen = await t.cloud("GET", "/v1/storage/user", { key: readOnly });
    expect(seen.status).toBe(200);
    expect(seen.body).toEqual({ ...user, s3Credentials: [] });
    expect((await t.cloud("GET", "/v1/cloud/storage/user/keys", { key: readOnly })).body).toEqual([]);
    // Still revoked: the admin's own listing (which generates nothing for an existing user) is empty.
    expect((await t.cloud("GET", "/v1/storage/user/keys", { key: admin })).body).toEqual([]);

    const [fresh] = (await t.cloud("POST", "/v1/storage/user/keys", { key: admin })).body;
    expect(fresh.secretKey).toMatch(/^[A-Za-z0-9+/]{40}$/);
    const redacted = { accessKey: fresh.accessKey, secretKey: null, userId: user.userId };
    expect((await t.cloud("GET", "/v1/storage/user", { key: readOnly })).body.s3Credentials).toEqual([
      redacted,
    ]);
    expect((await t.cloud("GET", "/v1/storage/user/keys", { key: readOnly })).body).toEqual([redacted]);
    expect((await t.cloud("GET", "/v1/storage/user/keys", { key: admin })).body).toEqual([fresh]);
  });

  it("is forbidden to create the object-storage user and leaves it uncreated", async () => {
    const { admin, readOnly } = await organizationWithReadOnlyKey("No bucket user yet");
    const refused = await t.cloud("GET", "/v1/storage/user", { key: readOnly });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: "forbidden" });
    expect((await t.cloud("GET", "/v1/storage/user/keys", { key: readOnly })).body).toEqual([]);
    expect((await t.cloud("GET", "/v1/storage/user", { key: readOnly })).status).toBe(403);

    const created = await t.cloud("GET", "/v1/storage/user", { key: admin });
    expect(created.body.s3Credentials).toHaveLength(1);
    expect((await t.cloud("GET", "/v1/storage/user", { key: readOnly })).body.s3Credentials).toEqual([
      { ...created.body.s3Credentials[0], secretKey: null },
    ]);
  });

  it("declares the secret nullable in the OpenAPI document", async () => {
    const doc = (await t.request("GET", "/openapi.json", { anonymous: true })).body;
    const listKeys = resolvedOperation(doc, doc.paths["/v1/storage/user/keys"].get);
    const keys = listKeys.responses["200"].content["application/json"].schema;
    expect(keys.items.properties.secretKey.anyOf).toContainEqual({ type: "null" });
  });
});
