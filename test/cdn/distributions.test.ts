import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HostnameClaimTokens } from "../../src/cdn/hostname-verification.ts";
import { loadSecretKey } from "../../src/secret-box.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import {
  createDistribution,
  type DnsServer,
  EDGE_ENV,
  edgeRequest,
  edgeUrlOf,
  insertDistributionRow,
  startDnsServer,
  startOrigin,
  uniqueHost,
} from "./support.ts";

describe("CDN distributions API", () => {
  let t: TestApp;
  let dns: DnsServer;
  beforeAll(async () => {
    dns = await startDnsServer();
    t = await startTestApp({ ...EDGE_ENV, CUMULO_DNS_SERVERS: dns.address });
  });
  afterAll(async () => {
    await t?.close();
    await dns?.close();
  });

  it("creates, reads, lists, updates and deletes a distribution", async () => {
    const hostname = uniqueHost("Crud").toUpperCase();
    const created = await t.request("POST", "/v1/cdn/distributions", {
      headers: { "x-api-key": t.adminKey },
      anonymous: true,
      json: { hostname, origin_url: "http://127.0.0.1:9/base" },
    });
    expect(created.status).toBe(201);
    expect(created.body.success).toBe(true);
    const distribution = created.body.data;
    expect(distribution).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      hostname: hostname.toLowerCase(),
      origin_url: "http://127.0.0.1:9/base",
      default_ttl_s: 3600,
      status: "active",
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updated_at: distribution.created_at,
    });

    const one = await t.request("GET", `/v1/cdn/distributions/${distribution.id}`);
    expect(one.status).toBe(200);
    expect(one.body.data).toEqual(distribution);

    const list = await t.request("GET", "/v1/cdn/distributions?limit=1");
    expect(list.status).toBe(200);
    expect(list.body.data[0].id).toBe(distribution.id);
    expect(list.body.meta.pagination).toMatchObject({ page: 1, page_size: 1 });
    expect(list.body.meta.links.self).toBe("/v1/cdn/distributions?limit=1&page=1");

    const patched = await t.request("PATCH", `/v1/cdn/distributions/${distribution.id}`, {
      json: { default_ttl_s: 60, status: "disabled", origin_url: "https://127.0.0.1:8443" },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.data).toMatchObject({
      default_ttl_s: 60,
      status: "disabled",
      origin_url: "https://127.0.0.1:8443",
    });

    // clients that always send a JSON content type may delete with an empty body
    const deleted = await t.request("DELETE", `/v1/cdn/distributions/${distribution.id}`, {
      headers: { "content-type": "application/json" },
      body: "",
    });
    expect(deleted.status).toBe(200);
    expect((await t.request("GET", `/v1/cdn/distributions/${distribution.id}`)).status).toBe(404);
    expect((await t.request("DELETE", `/v1/cdn/distributions/${distribution.id}`)).status).toBe(404);
  });

  it("trusts the first organization to name a host (no host name verification): verifying answers the distribution as it is", async () => {
    const { id } = await createDistribution(t, {
      hostname: uniqueHost("off"),
      origin_url: "http://127.0.0.1:9",
    });
    const one = (await t.request("GET", `/v1/cdn/distributions/${id}`)).body.data;
    expect(one).not.toHaveProperty("hostname_verification");
    const verify = await t.request("POST", `/v1/cdn/distributions/${id}/hostname-verification`);
    expect([verify.status, verify.body.data]).toEqual([200, one]);
  });

  it("refuses a host name already used, whatever its case and organization", async () => {
    const hostname = uniqueHost("dup");
    await createDistribution(t, { hostname, origin_url: "http://127.0.0.1:9" });
    const again = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname: hostname.toUpperCase(), origin_url: "http://127.0.0.1:9" },
    });
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ success: false, message: expect.any(String) });
    const other = await t.createOrganization();
    const fromOther = await t.request("POST", "/v1/cdn/distributions", {
      key: other.key,
      json: { hostname, origin_url: "http://127.0.0.1:9" },
    });
    expect(fromOther.status).toBe(409);
  });

  it("never hands a name over to another organization without host name verification, even a claim left pending", async () => {
    const hostname = uniqueHost("left-pending");
    // Created pending while the operator had verification on, then turned it off.
    const id = await insertDistributionRow(t, {
      hostname,
      origin_url: "http://127.0.0.1:9",
      hostname_token: "cumulo-verify-00000000000000000000000000000000",
      hostname_verified_at: null,
    });
    const other = await t.createOrganization();
    // The other organization's claim token in DNS would take the name over under `dns`; not here.
    const claimTokens = new HostnameClaimTokens(() => loadSecretKey(t.config.secretKey, t.config.dataDir));
    dns.records.set(`_cumulo-challenge.${hostname}`, [
      [claimTokens.tokenFor(other.organizationId, hostname)],
    ]);
    const fromOther = await t.request("POST", "/v1/cdn/distributions", {
      key: other.key,
      json: { hostname, origin_url: "http://127.0.0.1:9" },
    });
    expect([fromOther.status, fromOther.body]).toEqual([
      409,
      { success: false, message: "A distribution with this hostname already exists" },
    ]);
    expect((await t.request("GET", `/v1/cdn/distributions/${id}`)).status).toBe(200);
  });

  it("validates the body, reporting every failing field", async () => {
    const bad = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname: "not a host!", origin_url: "http://127.0.0.1:9", default_ttl_s: -1 },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: "hostname", code: "validation_format" }),
        expect.objectContaining({ field: "default_ttl_s", code: "validation_min" }),
      ]),
    );
    // a malformed origin is reported with the other fields, not after them
    const together = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname: "not a host!", origin_url: "ftp://example.com/" },
    });
    expect(together.status).toBe(400);
    expect(together.body.errors).toEqual([
      expect.objectContaining({ field: "hostname", code: "validation_format" }),
      expect.objectContaining({ field: "origin_url", code: "validation_format" }),
    ]);
    const text = await t.request("POST", "/v1/cdn/distributions", {
      headers: { "content-type": "text/plain" },
      body: "hostname=a.example.com",
    });
    expect(text.status).toBe(415);
    expect(text.body).toEqual({ success: false, message: "Unsupported Media Type" });
    const malformed = await t.request("POST", "/v1/cdn/distributions", {
      headers: { "content-type": "application/json" },
      body: '{"hostname": ',
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ success: false, message: "Invalid Request" });
    const missing = await t.request("POST", "/v1/cdn/distributions", { json: {} });
    expect(missing.status).toBe(400);
    expect(missing.body.errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: "hostname", code: "validation_required" }),
        expect.objectContaining({ field: "origin_url", code: "validation_required" }),
      ]),
    );
    for (const origin_url of ["ftp://example.com/", "not a url", "media://x"]) {
      const response = await t.request("POST", "/v1/cdn/distributions", {
        json: { hostname: uniqueHost(), origin_url },
      });
      expect(response.status, origin_url).toBe(400);
      expect(response.body.errors).toEqual([
        expect.objectContaining({ field: "origin_url", code: "validation_format" }),
      ]);
    }
    const status = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname: uniqueHost(), origin_url: "http://127.0.0.1:9" },
    });
    const patch = await t.request("PATCH", `/v1/cdn/distributions/${status.body.data.id}`, {
      json: { status: "paused" },
    });
    expect(patch.status).toBe(400);
    expect(patch.body.errors).toEqual([
      expect.objectContaining({ field: "status", code: "validation_enum" }),
    ]);
    const mediaOrigin = await t.request("PATCH", `/v1/cdn/distributions/${status.body.data.id}`, {
      json: { origin_url: "media://x" },
    });
    expect(mediaOrigin.status).toBe(400);
    expect(mediaOrigin.body.errors).toEqual([
      expect.objectContaining({ field: "origin_url", code: "validation_format" }),
    ]);
    expect((await t.request("GET", "/v1/cdn/distributions/not-a-uuid")).status).toBe(404);
  });

  it("needs a key and hides other organizations' distributions", async () => {
    const anonymous = await t.request("GET", "/v1/cdn/distributions", { anonymous: true });
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.code).toBe("auth_type_not_found");

    const mine = await createDistribution(t, {
      hostname: uniqueHost("iso"),
      origin_url: "http://127.0.0.1:9",
    });
    const other = await t.createOrganization();
    for (const [method, path, json] of [
      ["GET", `/v1/cdn/distributions/${mine.id}`, undefined],
      ["PATCH", `/v1/cdn/distributions/${mine.id}`, { default_ttl_s: 5 }],
      ["DELETE", `/v1/cdn/distributions/${mine.id}`, undefined],
      ["POST", `/v1/cdn/distributions/${mine.id}/purges`, { paths: ["/*"] }],
      ["GET", `/v1/cdn/distributions/${mine.id}/purges`, undefined],
    ] as const) {
      const response = await t.request(method, path, { key: other.key, ...(json ? { json } : {}) });
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(response.body).toEqual({ success: false, message: "Resource not found" });
    }
    const list = await t.request("GET", "/v1/cdn/distributions", { key: other.key });
    expect(list.body.data).toEqual([]);
    expect((await t.request("GET", `/v1/cdn/distributions/${mine.id}`)).status).toBe(200);
  });

  it("validates purge paths and keeps a purge history", async () => {
    const distribution = await createDistribution(t, {
      hostname: uniqueHost("purge"),
      origin_url: "http://127.0.0.1:9",
    });
    const path = `/v1/cdn/distributions/${distribution.id}/purges`;
    const bad = await t.request("POST", path, { json: { paths: ["/ok", "no-slash", "/a*b", "/fine*"] } });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toEqual([
      expect.objectContaining({ field: "paths.1", code: "validation_format" }),
      expect.objectContaining({ field: "paths.2", code: "validation_format" }),
    ]);
    const empty = await t.request("POST", path, { json: { paths: [] } });
    expect(empty.body.errors).toEqual([expect.objectContaining({ field: "paths", code: "validation_min" })]);
    const many = await t.request("POST", path, {
      json: { paths: Array.from({ length: 1001 }, (_, i) => `/p${i}`) },
    });
    expect(many.body.errors).toEqual([expect.objectContaining({ field: "paths", code: "validation_max" })]);
    const long = await t.request("POST", path, { json: { paths: [`/${"a".repeat(2048)}`] } });
    expect(long.body.errors).toEqual([expect.objectContaining({ field: "paths.0", code: "validation_max" })]);

    const first = await t.request("POST", path, { json: { paths: ["/a.jpg"] } });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({});
    const second = await t.request("POST", path, { json: { paths: ["/*", "/img/*"] } });
    expect(second.status).toBe(200);
    const history = await t.request("GET", `${path}?limit=1`);
    expect(history.status).toBe(200);
    expect(history.body.meta.pagination).toEqual({ page: 1, page_size: 1, total: 2, total_pages: 2 });
    expect(history.body.data).toEqual([
      {
        id: expect.any(String),
        distribution_id: distribution.id,
        paths: ["/*", "/img/*"],
        created_at: expect.any(String),
      },
    ]);
    const unknown = await t.request(
      "POST",
      "/v1/cdn/distributions/00000000-0000-4000-8000-000000000000/purges",
      {
        json: { paths: ["/*"] },
      },
    );
    expect(unknown.status).toBe(404);
  });

  it("names the distribution path parameter distributionID in the OpenAPI document, as SPEC.md does", async () => {
    const { paths } = (await t.request("GET", "/openapi.json", { anonymous: true })).body as {
      paths: Record<string, Record<string, { parameters?: { in: string; name: string }[] }>>;
    };
    const purge = paths["/v1/cdn/distributions/{distributionID}/purges"]?.post;
    expect(purge?.parameters?.filter((p) => p.in === "path").map((p) => p.name)).toEqual(["distributionID"]);
  });

  it("shows library distributions like any other but keeps their origin", async () => {
    const { organizationId, key } = await t.createOrganization("media org");
    const libraryId = "11111111-1111-4111-8111-111111111111";
    const created = await t.cumulo.services.cdn.createLibraryDistribution(t.cumulo.store.db, {
      organizationId,
      libraryId,
    });
    expect(created.hostname).toBe(`${libraryId}.media.cumulo.local`);
    const found = await t.cumulo.services.cdn.get(organizationId, created.id);
    expect(found).toMatchObject({
      outcome: "found",
      distribution: { origin_url: `media://${libraryId}`, status: "active" },
    });
    const other = await t.cumulo.services.cdn.update(organizationId, created.id, {
      origin_url: "http://127.0.0.1:9",
    });
    expect(other).toEqual({ outcome: "library_distribution" });
    // Through the API: its own origin written back unchanged is accepted; a change of it is not.
    const path = `/v1/cdn/distributions/${created.id}`;
    const same = await t.request("PATCH", path, {
      key,
      json: { origin_url: `media://${libraryId}`, default_ttl_s: 60 },
    });
    expect(same.status, same.text).toBe(200);
    expect(same.body.data).toMatchObject({ origin_url: `media://${libraryId}`, default_ttl_s: 60 });
    const moved = await t.request("PATCH", path, { key, json: { origin_url: "media://elsewhere" } });
    expect(moved.status).toBe(409);
    expect(
      await t.cumulo.services.cdn.deleteDistribution(t.cumulo.store.db, organizationId, created.id),
    ).toBe(true);
  });
});

describe("CDN origins on private addresses", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_ORIGIN_ALLOW_PRIVATE: "false", CUMULO_EDGE_PORT: "0" });
  });
  afterAll(() => t.close());

  it("refuses origins that resolve to loopback or private addresses", async () => {
    for (const origin_url of [
      "http://127.0.0.1:8080",
      "http://10.1.2.3/",
      "http://localhost/",
      "http://[::1]/",
      "http://[::127.0.0.1]/", // IPv4-compatible IPv6
    ]) {
      const response = await t.request("POST", "/v1/cdn/distributions", {
        json: { hostname: uniqueHost("private"), origin_url },
      });
      expect(response.status, origin_url).toBe(400);
      expect(response.body.errors).toEqual([
        expect.objectContaining({ field: "origin_url", code: "validation_format" }),
      ]);
    }
    // reported with the body's other failing fields, in one answer
    const several = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname: uniqueHost("several"), origin_url: "http://10.1.2.3/", default_ttl_s: -1 },
    });
    expect(several.status).toBe(400);
    expect(several.body.errors).toEqual([
      expect.objectContaining({ field: "default_ttl_s", code: "validation_min" }),
      expect.objectContaining({ field: "origin_url", code: "validation_format" }),
    ]);
    // a name that does not resolve names no private address (the edge checks again when connecting)
    const unresolved = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname: uniqueHost("later"), origin_url: "https://origin.does-not-exist.invalid/" },
    });
    expect(unresolved.status).toBe(201);
  });

  it("never lets the edge connect to a private origin, whatever the stored row says", async () => {
    const origin = await startOrigin();
    try {
      origin.route("/inside", (_req, res) => res.writeHead(200).end("internal"));
      const port = new URL(origin.url).port;
      const { organizationId } = await t.createOrganization("guarded");
      for (const [hostname, origin_url] of [
        [uniqueHost("literal"), `http://127.0.0.1:${port}`],
        [uniqueHost("named"), `http://localhost:${port}`],
      ] as const) {
        // written behind the API's back, as if the name had resolved publicly when it was saved
        await insertDistributionRow(t, { hostname, origin_url }, organizationId);
        const response = await edgeRequest(edgeUrlOf(t), `/${hostname}/inside`);
        expect(response.status, origin_url).toBe(502);
      }
      expect(origin.hitsOf("/inside")).toBe(0);
    } finally {
      await origin.close();
    }
  });
});
