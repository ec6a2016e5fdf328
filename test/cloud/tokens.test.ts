import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OrganizationGoneError } from "../../src/identity/service.ts";
import { startCumulo } from "../../src/roles.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

const DATE_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;

describe("cloud tokens and billing accounts", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it("lists locations and the organization's billing accounts", async () => {
    const locations = await t.cloud("GET", "/v1/config/locations");
    expect(locations.status).toBe(200);
    expect(locations.body).toEqual([
      {
        slug: "local-1",
        display_name: "Local 1",
        description: expect.any(String),
        country_code: "ZZ",
        is_default: true,
        is_preferred: true,
        order_nr: 0,
      },
    ]);
    const accounts = await t.cloud("GET", "/v1/payment/billing_account/list");
    expect(accounts.status).toBe(200);
    expect(accounts.body).toHaveLength(1);
    expect(accounts.body[0]).toMatchObject({ id: expect.any(Number), is_default: true });
  });

  it("creates a token from a form that authenticates at once and is listed without its secret", async () => {
    const accounts = await t.cloud("GET", "/v1/payment/billing_account/list");
    const billingId = accounts.body[0].id as number;
    const created = await t.cloud("POST", "/v1/user-resource/token", {
      form: { billing_account_id: String(billingId), description: "ci", restricted: "false" },
    });
    expect(created.status).toBe(200);
    expect(Array.isArray(created.body)).toBe(true);
    const [token] = created.body;
    expect(token).toEqual({
      id: expect.any(Number),
      billing_account_id: billingId,
      user_id: expect.any(Number),
      consumer_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      description: "ci",
      restricted: false,
      token: expect.any(String),
      created_at: expect.stringMatching(DATE_TIME),
      updated_at: expect.stringMatching(DATE_TIME),
    });
    const withToken = await t.cloud("GET", "/v1/user-resource/token/list", { key: token.token });
    expect(withToken.status).toBe(200);
    const listed = withToken.body.find((row: { id: number }) => row.id === token.id);
    expect(listed).toBeDefined();
    expect(listed).not.toHaveProperty("token");
    expect(listed.description).toBe("ci");
    // also accepted in X-API-Key
    const viaHeader = await t.cloud("GET", "/v1/config/locations", {
      anonymous: true,
      headers: { "X-API-Key": token.token },
    });
    expect(viaHeader.status).toBe(200);
    // only a hash is kept
    const rows = await t.cumulo.store.db.selectFrom("api_keys").select(["key_hash", "kind"]).execute();
    expect(rows.some((row) => row.kind === "cloud_token")).toBe(true);
    expect(JSON.stringify(rows)).not.toContain(token.token);
  });

  it("accepts JSON and 1/0 booleans, and defaults the billing account", async () => {
    const json = await t.cloud("POST", "/v1/user-resource/token", {
      json: { description: "j", restricted: true },
    });
    expect(json.status).toBe(200);
    expect(json.body[0]).toMatchObject({ restricted: true, billing_account_id: expect.any(Number) });
    const form = await t.cloud("POST", "/v1/user-resource/token", { form: { restricted: "1" } });
    expect(form.status).toBe(200);
    expect(form.body[0]).toMatchObject({ restricted: true, description: "" });
    const zero = await t.cloud("POST", "/v1/user-resource/token", { json: { restricted: 0 } });
    expect(zero.body[0].restricted).toBe(false);
    // A form's fields sent as JSON with their values still text read as the form would.
    const billingId = json.body[0].billing_account_id as number;
    const texty = await t.cloud("POST", "/v1/user-resource/token", {
      json: { billing_account_id: String(billingId), restricted: "true" },
    });
    expect(texty.status).toBe(200);
    expect(texty.body[0]).toMatchObject({ billing_account_id: billingId, restricted: true });
    // Python's requests writes a form boolean as `True`/`False`.
    const python = await t.cloud("POST", "/v1/user-resource/token", { form: { restricted: "True" } });
    expect(python.status).toBe(200);
    expect(python.body[0].restricted).toBe(true);
  });

  it("documents billing_account_id as an integer, never null, as SPEC.md types it, and the secret in the creation only", async () => {
    type TokenSchema = { items: { properties: Record<string, unknown>; required?: string[] } };
    const { components } = (await t.request("GET", "/openapi.json", { anonymous: true })).body as {
      components: { responses: Record<string, { content: Record<string, { schema: TokenSchema }> }> };
    };
    for (const name of ["createToken_200", "listTokens_200"]) {
      const token = components.responses[name]?.content["application/json"]?.schema.items;
      expect(token?.properties.billing_account_id, name).toEqual({ type: "integer" });
    }
    // The secret is always in the creation's answer (a typed client read it as possibly missing), never in a list.
    const created = components.responses.createToken_200?.content["application/json"]?.schema.items;
    const listed = components.responses.listTokens_200?.content["application/json"]?.schema.items;
    expect(created?.required).toContain("token");
    expect(listed?.properties).not.toHaveProperty("token");
  });

  it("rejects wrong types and foreign billing accounts with the cloud validation body", async () => {
    const badBool = await t.cloud("POST", "/v1/user-resource/token", { form: { restricted: "maybe" } });
    expect(badBool.status).toBe(400);
    expect(badBool.body).toEqual({ message: "Invalid Request", errors: { restricted: expect.any(String) } });
    const badInt = await t.cloud("POST", "/v1/user-resource/token", { form: { billing_account_id: "abc" } });
    expect(badInt.status).toBe(400);
    expect(Object.keys(badInt.body.errors)).toEqual(["billing_account_id"]);
    const other = await t.createOrganization("Billing other");
    const foreign = await t.cloud("POST", "/v1/user-resource/token", {
      json: { billing_account_id: other.billingAccountId },
    });
    expect(foreign.status).toBe(400);
    expect(foreign.body).toEqual({
      message: "Invalid Request",
      errors: { billing_account_id: expect.any(String) },
    });
    // An id past the store's range is no account of the organization either: the same words, which
    // say nothing of how ids are stored.
    for (const billing_account_id of ["99999999999", "0"]) {
      const outside = await t.cloud("POST", "/v1/user-resource/token", { form: { billing_account_id } });
      expect(outside.status).toBe(400);
      expect(outside.body).toEqual(foreign.body);
    }
    expect(foreign.body.errors.billing_account_id).toBe(
      "The billing_account_id field must name a billing account of your organization.",
    );
  });

  it("reads a form's long integers as JSON's, refuses other charsets and takes a JSON null as no object", async () => {
    // Sixteen digits and more were text in a form, "must be of type integer"; as JSON numbers they are 404.
    for (const tokenId of ["9007199254740993", "99999999999999999999"]) {
      const deleted = await t.cloud("DELETE", "/v1/user-resource/token", { form: { token_id: tokenId } });
      expect([deleted.status, deleted.body.errors], tokenId).toEqual([
        404,
        { Error: "Failed to delete token: token not found" },
      ]);
    }
    const latin1 = await t.cloud("POST", "/v1/user-resource/token", {
      body: "description=caf\xe9",
      headers: { "content-type": "application/x-www-form-urlencoded; charset=iso-8859-1" },
    });
    expect(latin1.status).toBe(415);
    const utf8 = await t.cloud("POST", "/v1/user-resource/token", {
      body: new URLSearchParams({ description: "café" }).toString(),
      headers: { "content-type": "application/x-www-form-urlencoded; charset=UTF-8" },
    });
    expect([utf8.status, utf8.body[0]?.description]).toEqual([200, "café"]);
    const before = (await t.cloud("GET", "/v1/user-resource/token/list")).body.length;
    expect(before).toBeGreaterThan(0);
    const nullBody = await t.cloud("POST", "/v1/user-resource/token", {
      body: "null",
      headers: { "content-type": "application/json" },
    });
    expect([nullBody.status, nullBody.body.message]).toEqual([400, "Invalid Request"]);
    expect((await t.cloud("GET", "/v1/user-resource/token/list")).body.length).toBe(before);
  });

  it("updates a token and answers 404 for an unknown one", async () => {
    const created = await t.cloud("POST", "/v1/user-resource/token", { form: { description: "before" } });
    const id = created.body[0].id;
    const updated = await t.cloud("PATCH", "/v1/user-resource/token", {
      form: { token_id: String(id), description: "after", restricted: "true" },
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual([expect.objectContaining({ id, description: "after", restricted: true })]);
    expect(updated.body[0]).not.toHaveProperty("token");
    // CONTRACT 9: an unknown token id is 404, also one past the store's 32-bit ids or below 1.
    for (const token_id of [99999999999, 2147483648, 0, -1]) {
      const deleted = await t.cloud("DELETE", "/v1/user-resource/token", { json: { token_id } });
      expect(deleted.status).toBe(404);
      expect(deleted.body).toEqual({
        message: "Failed to delete token: token not found",
        errors: { Error: "Failed to delete token: token not found" },
      });
      const changed = await t.cloud("PATCH", "/v1/user-resource/token", {
        form: { token_id: String(token_id) },
      });
      expect(changed.status).toBe(404);
      expect(changed.body.errors).toEqual({ Error: "Failed to update token: token not found" });
    }
    const queried = await t.cloud("DELETE", "/v1/user-resource/token?token_id=99999999999");
    expect(queried.status).toBe(404);
    const notObject = await t.cloud("POST", "/v1/user-resource/token", { json: [1, 2] });
    expect(notObject.status).toBe(400);
    expect(notObject.body).toEqual({ message: "Invalid Request", errors: { Error: "Invalid Request" } });
    const nul = await t.cloud("POST", "/v1/user-resource/token", { json: { description: "a\u0000b" } });
    expect(nul.status).toBe(400);
    const missing = await t.cloud("PATCH", "/v1/user-resource/token", { json: { token_id: 999999 } });
    expect(missing.status).toBe(404);
    expect(missing.body.errors.Error).toEqual(expect.any(String));
  });

  it("deletes a token: it stops working at once, and a second delete is 404", async () => {
    const created = await t.cloud("POST", "/v1/user-resource/token", {
      form: { description: "short-lived" },
    });
    const { id, token } = created.body[0];
    expect((await t.cloud("GET", "/v1/storage/api/s3", { key: token })).status).toBe(200);
    const deleted = await t.cloud("DELETE", "/v1/user-resource/token", { form: { token_id: String(id) } });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ success: true });
    const after = await t.cloud("GET", "/v1/storage/api/s3", { key: token });
    expect(after.status).toBe(401);
    expect(after.body).toMatchObject({ error: "unauthorized" });
    const again = await t.cloud("DELETE", "/v1/user-resource/token", { json: { token_id: id } });
    expect(again.status).toBe(404);
    expect(again.body).toEqual({
      message: "Failed to delete token: token not found",
      errors: { Error: "Failed to delete token: token not found" },
    });
    const missingField = await t.cloud("DELETE", "/v1/user-resource/token", { form: {} });
    expect(missingField.status).toBe(400);
    expect(missingField.body.errors).toHaveProperty("token_id");
  });

  it("refuses a token deleted on one node at once on another node of the same store", async () => {
    const other = await startCumulo({ ...t.config, port: 0 });
    try {
      const created = await t.cloud("POST", "/v1/user-resource/token", {
        form: { description: "two nodes" },
      });
      const { id, token } = created.body[0];
      const onOther = (path: string, init: RequestInit = {}) =>
        fetch(`${other.apiUrl}${path}`, { ...init, headers: { apikey: token, ...(init.headers ?? {}) } });
      expect((await onOther("/v1/storage/api/s3")).status).toBe(200);
      const deleted = await t.cloud("DELETE", "/v1/user-resource/token", { form: { token_id: String(id) } });
      expect(deleted.status).toBe(200);
      expect((await onOther("/v1/storage/api/s3")).status).toBe(401);
    } finally {
      await other.close();
    }
  });

  it("forbids a restricted token to manage tokens but lets it work otherwise", async () => {
    const created = await t.cloud("POST", "/v1/user-resource/token", { form: { restricted: "true" } });
    const restricted = created.body[0];
    for (const [method, options] of [
      ["POST", { form: { description: "nope" } }],
      ["PATCH", { form: { token_id: String(restricted.id), description: "x" } }],
      ["DELETE", { form: { token_id: String(restricted.id) } }],
      // Whatever it sends: the refusal comes before the body's check.
      ["POST", { form: { restricted: "maybe" } }],
      ["PATCH", { form: {} }],
      ["DELETE", { form: { token_id: "x" } }],
    ] as const) {
      const response = await t.cloud(method, "/v1/user-resource/token", {
        ...options,
        key: restricted.token,
      });
      expect(response.status).toBe(403);
      expect(response.body).toMatchObject({ error: "forbidden", message: expect.any(String) });
    }
    expect((await t.cloud("GET", "/v1/user-resource/token/list", { key: restricted.token })).status).toBe(
      200,
    );
    expect((await t.cloud("GET", "/v1/storage/disks", { key: restricted.token })).status).toBe(200);
  });

  it("refuses as gone, not as a server error, a write of an organization removed while it ran (QA of 5 December, session 43)", async () => {
    // What `cumulo orgs delete` leaves a request that passed its key check just before: on SQLite
    // the default billing account and first user read as missing (500 before); PostgreSQL's foreign
    // keys answered 404.
    const leaving = await t.createOrganization("Leaving mid-request");
    const auth = await t.cumulo.services.identity.authenticate(leaving.key);
    expect(auth).toBeDefined();
    await t.cumulo.store.db.deleteFrom("organizations").where("id", "=", leaving.organizationId).execute();
    await expect(
      t.cumulo.services.cloud.tokens.create(auth!, {
        billingAccountId: undefined,
        description: "",
        restricted: false,
      }),
    ).rejects.toBeInstanceOf(OrganizationGoneError);

    // Through the API: on SQLite the key, checked a moment before, is still in the auth cache (the
    // deletion ran on the node's own connection), so the request reaches the billing account; on
    // PostgreSQL the deletion's notification may have dropped the key first (401).
    const racing = await t.createOrganization("Leaving through the API");
    expect((await t.request("GET", "/v1/livestream/health", { key: racing.key })).status).toBe(200);
    await t.cumulo.store.db.deleteFrom("organizations").where("id", "=", racing.organizationId).execute();
    const created = await t.cloud("POST", "/v1/user-resource/token", {
      key: racing.key,
      form: { description: "late", restricted: "false" },
    });
    expect([401, 404]).toContain(created.status);
  });
});
