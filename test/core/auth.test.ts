import type { FastifyBaseLogger } from "fastify";
import { sql } from "kysely";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

const MISSING = {
  success: false,
  error: "unauthorized",
  code: "auth_type_not_found",
  message: "Could not determine the authentication type: provide a valid Authorization or X-API-Key header.",
};

describe("authentication", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it("accepts the bootstrap key as Bearer and as X-API-Key", async () => {
    const bearer = await t.request("GET", "/v1/livestream/health");
    expect(bearer.status).toBe(200);
    expect(bearer.body).toEqual({ status: "healthy" });
    const apiKey = await t.request("GET", "/v1/livestream/health", {
      anonymous: true,
      headers: { "X-API-KEY": t.adminKey },
    });
    expect(apiKey.status).toBe(200);
  });

  // No header and another group's header, on every operation: auth-matrix.test.ts.
  it("answers the auth_type_not_found body to an Authorization header that is not a Bearer key", async () => {
    const variants: Record<string, string>[] = [{ authorization: "Basic abc" }, { authorization: "Bearer" }];
    for (const headers of variants) {
      const response = await t.request("GET", "/v1/livestream/health", { anonymous: true, headers });
      expect(response.status).toBe(401);
      expect(response.body).toEqual(MISSING);
    }
  });

  it("rejects an unknown key with 401 unauthorized", async () => {
    const response = await t.request("GET", "/v1/livestream/health", {
      key: "cmk_not-a-real-key-at-all-000000",
    });
    expect(response.status).toBe(401);
    expect(response.body).toMatchObject({ success: false, error: "unauthorized" });
  });

  it("stops accepting a revoked key at once", async () => {
    const org = await t.createOrganization("Revocation org");
    const created = await t.cumulo.services.identity.createApiKey(org.organizationId, {
      name: "temp",
      readOnly: false,
    });
    if (created.outcome !== "created") throw new Error("key not created");
    expect((await t.request("GET", "/v1/livestream/health", { key: created.api_key })).status).toBe(200);
    expect(await t.cumulo.services.identity.revokeApiKey(created.id)).toEqual({ outcome: "revoked" });
    expect((await t.request("GET", "/v1/livestream/health", { key: created.api_key })).status).toBe(401);
    expect(await t.cumulo.services.identity.revokeApiKey(created.id)).toEqual({ outcome: "not_found" });
  });

  it("stores only a hash and a display prefix of each key", async () => {
    const rows = await t.cumulo.store.db.selectFrom("api_keys").select(["prefix", "key_hash"]).execute();
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(row.key_hash).not.toContain(t.adminKey);
      expect(row.prefix.length).toBeLessThanOrEqual(12);
    }
  });

  it("lists at most a quarter of a chosen key, also as a store written before 0705 kept it", async () => {
    const created = await t.request("POST", "/v1/organization/api-keys", {
      json: { name: "dashboard", read_only: true },
    });
    const reader = created.body.data.api_key as string;
    // A generated key: `cmk_` and 8 of its random characters, as before.
    expect(created.body.data.prefix).toBe(reader.slice(0, 12));
    const bootstrapPrefix = async () => {
      const listed = await t.request("GET", "/v1/organization/api-keys", { key: reader });
      expect(listed.status).toBe(200);
      return listed.body.data.find((key: { name: string }) => key.name === "admin").prefix as string;
    };
    // The chosen bootstrap key (31 characters): 7 shown, not 12 of them.
    expect(await bootstrapPrefix()).toBe(t.adminKey.slice(0, 7));

    const { db } = t.cumulo.store;
    await db
      .updateTable("api_keys")
      .set({ prefix: t.adminKey.slice(0, 12) })
      .where("name", "=", "admin")
      .execute();
    await sql`delete from kysely_migration where name = '0705-chosen-key-prefixes'`.execute(db);
    expect(await t.cumulo.store.migrate()).toEqual(["0705-chosen-key-prefixes"]);
    expect(await bootstrapPrefix()).toBe(t.adminKey.slice(0, 5));
    const generated = await t.request("GET", "/v1/organization/api-keys", { key: reader });
    expect(generated.body.data.find((key: { name: string }) => key.name === "dashboard").prefix).toBe(
      reader.slice(0, 12),
    );
  });
});

// CONTRACT 2: on start, the default organization exists with CUMULO_BOOTSTRAP_API_KEY. A revoked one
// stayed revoked while the start said "ready" (QA of 4 December); developer mode's reset restored it.
it("makes a revoked bootstrap key valid again at the next start, and says so", async () => {
  const first = await startTestApp();
  const store = first.store;
  const warnings: string[] = [];
  try {
    const [key] =
      (await first.cumulo.services.identity.listApiKeys(
        (await first.cumulo.services.identity.listOrganizations())[0]?.id ?? "",
      )) ?? [];
    if (!key) throw new Error("no bootstrap key");
    expect((await first.cumulo.services.identity.revokeApiKey(key.id)).outcome).toBe("revoked");
    expect((await first.request("GET", "/v1/livestream/health")).status).toBe(401);
    await first.cumulo.close();
    const logger = pino({ level: "warn" }, { write: (line: string) => void warnings.push(line) });
    const again = await startTestApp({}, { store, logger: logger as FastifyBaseLogger });
    try {
      expect((await again.request("GET", "/v1/livestream/health")).status).toBe(200);
    } finally {
      await again.cumulo.close();
    }
    expect(warnings.join("")).toContain("CUMULO_BOOTSTRAP_API_KEY names a key that was revoked");
  } finally {
    await store.drop();
  }
});
