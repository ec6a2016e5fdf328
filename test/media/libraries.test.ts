import { validate } from "@readme/openapi-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { BLANK_TEXTS, blankError } from "../support/blank-text.ts";
import { waitUntil } from "../support/wait.ts";
import { createLibrary, fieldErrors, MISSING_ID } from "./helpers.ts";

const UUID = /^[0-9a-f-]{36}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe("media libraries", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it("creates a provisioning library with its own distribution, then it becomes active", async () => {
    const created = await t.request("POST", "/v1/media/libraries", { json: { name: "Main" } });
    expect(created.status).toBe(201);
    expect(created.body.success).toBe(true);
    expect(created.body.message).toEqual(expect.any(String));
    const library = created.body.data;
    expect(library).toEqual({
      id: expect.stringMatching(UUID),
      name: "Main",
      description: "",
      usage_type: "video_on_demand",
      default_privacy: "unlisted",
      status: "provisioning",
      region: "eu-central",
      distribution_id: expect.stringMatching(UUID),
      organization_id: expect.stringMatching(UUID),
      created_by: expect.stringMatching(UUID),
      updated_by: null,
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
    });
    const distribution = await t.cumulo.store.db
      .selectFrom("cdn_distributions")
      .selectAll()
      .where("id", "=", library.distribution_id)
      .executeTakeFirst();
    expect(distribution?.hostname).toBe(`${library.id}.media.cumulo.local`);
    expect(distribution?.library_id).toBe(library.id);

    // "Active within seconds": the provisioning job is woken at once, not found by polling.
    await waitUntil(
      async () => (await t.request("GET", `/v1/media/libraries/${library.id}`)).body.data.status === "active",
      5000,
      "the library to become active",
    );
  });

  it("marks a library failed when provisioning gives up", async () => {
    const base = await createLibrary(t);
    const now = new Date().toISOString();
    const id = crypto.randomUUID();
    const { store, services } = t.cumulo;
    // A library whose distribution is missing cannot be provisioned.
    await store.db
      .insertInto("libraries")
      .values({
        id,
        organization_id: base.organization_id as string,
        name: "Broken",
        search_name: "BROKEN",
        description: "",
        usage_type: "video_on_demand",
        default_privacy: "unlisted",
        status: "provisioning",
        region: "eu-central",
        distribution_id: crypto.randomUUID(),
        whitelist_referrers: "{}",
        blocked_countries: "{}",
        video_privacy: "unlisted",
        created_by: base.created_by as string,
        updated_by: null,
        created_at: now,
        updated_at: now,
      })
      .execute();
    const handler = services.jobHandlers.find((h) => h.kind === "media.provision-library");
    await expect(
      handler?.handle({ libraryId: id }, { jobId: "x", attempt: 1, heartbeat: async () => true }),
    ).rejects.toThrow();
    await handler?.onGiveUp?.({ libraryId: id }, "no distribution");
    const response = await t.request("GET", `/v1/media/libraries/${id}`);
    expect(response.body.data.status).toBe("failed");
  });

  it("documents distribution_id as a UUID, never null, as SPEC.md types it", async () => {
    type Library = { properties: Record<string, unknown> };
    type Operation = {
      responses: {
        200: {
          content: {
            "application/json": { schema: { properties: { data: Library & { items?: Library } } } };
          };
        };
      };
    };
    const { paths } = (await t.request("GET", "/openapi.json", { anonymous: true })).body as {
      paths: Record<string, Record<string, Operation>>;
    };
    const data = (path: string) =>
      paths[path]?.get?.responses[200].content["application/json"].schema.properties.data;
    const one = data("/v1/media/libraries/{libraryId}");
    const listed = data("/v1/media/libraries")?.items;
    for (const library of [one, listed]) {
      expect(library?.properties.distribution_id).toEqual({ type: "string", format: "uuid" });
    }
  });

  it("accepts every field and rejects bad ones, all at once", async () => {
    const full = await createLibrary(t, {
      name: "Full",
      description: "About",
      usage_type: "mixed",
      default_privacy: "private",
      region: "us-east",
    });
    expect(full).toMatchObject({ usage_type: "mixed", default_privacy: "private", region: "us-east" });

    const bad = await t.request("POST", "/v1/media/libraries", {
      json: {
        name: 5,
        usage_type: "tv",
        default_privacy: "secret",
        region: "mars",
        description: "x".repeat(2001),
      },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toBe("Invalid Request");
    expect(fieldErrors(bad.body)).toEqual({
      name: "validation_type",
      usage_type: "validation_enum",
      default_privacy: "validation_enum",
      region: "validation_enum",
      description: "validation_max",
    });
    // A value of the wrong JSON type for a list of allowed strings is a wrong type, not a wrong value.
    const mistyped = await t.request("POST", "/v1/media/libraries", {
      json: { name: "Typed", usage_type: 5, default_privacy: true, region: [] },
    });
    expect(mistyped.status).toBe(400);
    expect(mistyped.body.errors).toEqual(
      ["usage_type", "default_privacy", "region"].map((field) => ({
        field,
        code: "validation_type",
        message: `The ${field} field must be of type string.`,
      })),
    );
    const missing = await t.request("POST", "/v1/media/libraries", { json: {} });
    expect(fieldErrors(missing.body)).toEqual({ name: "validation_required" });
    const empty = await t.request("POST", "/v1/media/libraries", { json: { name: "" } });
    expect(fieldErrors(empty.body)).toEqual({ name: "validation_min" });
    // Bounds read as sentences with their limit, not as a schema's keyword.
    expect(empty.body.errors[0].message).toBe("The name field must not be empty.");
    expect(bad.body.errors.find((error: { field: string }) => error.field === "description").message).toBe(
      "The description field must be at most 2000 characters long.",
    );
    const outOfRange = await t.request("GET", "/v1/media/libraries?limit=101&page=0");
    expect(outOfRange.body.errors.map((error: { message: string }) => error.message)).toEqual([
      "The limit field must be at most 100.",
      "The page field must be at least 1.",
    ]);
  });

  it("updates name, description and default privacy and records who did", async () => {
    const library = await createLibrary(t, { name: "Before" });
    const updated = await t.request("PATCH", `/v1/media/libraries/${library.id}`, {
      json: { name: "After", description: "New", default_privacy: "public" },
    });
    expect(updated.status).toBe(200);
    expect(updated.body.data).toMatchObject({ name: "After", description: "New", default_privacy: "public" });
    expect(updated.body.data.updated_by).toBe(library.created_by);
    const bad = await t.request("PATCH", `/v1/media/libraries/${library.id}`, {
      json: { default_privacy: "x" },
    });
    expect(fieldErrors(bad.body)).toEqual({ default_privacy: "validation_enum" });
    const missing = await t.request("PATCH", `/v1/media/libraries/${MISSING_ID}`, { json: { name: "x" } });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ success: false, message: "Resource not found" });
  });

  it("refuses a blank name on create and update, and keeps a name with spaces around it as sent", async () => {
    const library = await createLibrary(t, { name: " My lib " });
    expect(library.name).toBe(" My lib ");
    const before = (await t.request("GET", "/v1/media/libraries")).body.meta.pagination.total;
    for (const name of BLANK_TEXTS) {
      const created = await t.request("POST", "/v1/media/libraries", { json: { name } });
      expect(created.status).toBe(400);
      expect(created.body).toEqual({
        success: false,
        message: "Invalid Request",
        errors: [blankError("name")],
      });
      const patched = await t.request("PATCH", `/v1/media/libraries/${library.id}`, {
        json: { name, description: "kept?" },
      });
      expect(patched.status).toBe(400);
      expect(patched.body.errors).toEqual([blankError("name")]);
    }
    // Nothing was written by a refused request.
    expect((await t.request("GET", "/v1/media/libraries")).body.meta.pagination.total).toBe(before);
    const stored = await t.request("GET", `/v1/media/libraries/${library.id}`);
    expect(stored.body.data).toMatchObject({ name: " My lib ", description: "" });
    // The length rule is unchanged: 255 characters pass, white space among them.
    const longest = await t.request("PATCH", `/v1/media/libraries/${library.id}`, {
      json: { name: ` ${"x".repeat(253)} ` },
    });
    expect(longest.status).toBe(200);
  });

  it("answers 404 for a missing or malformed library id", async () => {
    for (const id of [MISSING_ID, "not-a-uuid"]) {
      const response = await t.request("GET", `/v1/media/libraries/${id}`);
      expect(response.status).toBe(404);
      expect(response.body).toEqual({ success: false, message: "Resource not found" });
    }
  });

  it("deletes a library with everything in it", async () => {
    const library = await createLibrary(t);
    const video = await t.request("POST", `/v1/media/libraries/${library.id}/videos`, {
      json: { title: "V" },
    });
    await t.request("POST", `/v1/media/libraries/${library.id}/folders`, { json: { name: "F" } });
    await t.request("POST", `/v1/media/libraries/${library.id}/players`, { json: { name: "P" } });
    const deleted = await t.request("DELETE", `/v1/media/libraries/${library.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ success: true, message: expect.any(String) });
    expect((await t.request("GET", `/v1/media/libraries/${library.id}`)).status).toBe(404);
    const db = t.cumulo.store.db;
    expect(
      await db.selectFrom("media_videos").where("id", "=", video.body.data.id).selectAll().execute(),
    ).toEqual([]);
    expect(
      await db.selectFrom("media_folders").where("library_id", "=", library.id).selectAll().execute(),
    ).toEqual([]);
    expect(
      await db.selectFrom("media_players").where("library_id", "=", library.id).selectAll().execute(),
    ).toEqual([]);
    expect(
      await db.selectFrom("cdn_distributions").where("library_id", "=", library.id).selectAll().execute(),
    ).toEqual([]);
    expect((await t.request("DELETE", `/v1/media/libraries/${library.id}`)).status).toBe(404);
  });

  // Refusals (no key, revoked, read-only, other tenants) are test/core/auth-matrix.test.ts.
  it("accepts X-API-Key", async () => {
    const viaHeader = await t.request("GET", "/v1/media/libraries", {
      anonymous: true,
      headers: { "x-api-key": t.adminKey },
    });
    expect(viaHeader.status).toBe(200);
  });

  it("follows the request conventions", async () => {
    const malformed = await t.request("POST", "/v1/media/libraries", {
      body: "{not json",
      headers: { "content-type": "application/json" },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ success: false, message: "Invalid Request" });
    const large = await t.request("POST", "/v1/media/libraries", {
      json: { name: "x", description: "y".repeat(1024 * 1024 + 10) },
    });
    expect(large.status).toBe(413);
    expect(large.body).toEqual({ success: false, message: "Payload Too Large" });
    const empty = await t.request("POST", "/v1/media/libraries", {
      body: "",
      headers: { "content-type": "application/json" },
    });
    // An empty JSON body is no body: the required fields are named.
    expect(empty.status).toBe(400);
    expect(empty.body).toMatchObject({
      success: false,
      message: "Invalid Request",
      errors: [{ field: "name", code: "validation_required" }],
    });
    // Like any unknown field, `__proto__` is ignored, and it reaches no prototype.
    const poisoned = await t.request("POST", "/v1/media/libraries", {
      body: '{"name":"x","__proto__":{"admin":true},"constructor":{"prototype":{"admin":true}}}',
      headers: { "content-type": "application/json" },
    });
    expect(poisoned.status, poisoned.text).toBe(201);
    expect(poisoned.body.data).not.toHaveProperty("admin");
    expect(({} as { admin?: unknown }).admin).toBeUndefined();
    const form = await t.request("POST", "/v1/media/libraries", { form: { name: "x" } });
    expect(form.status).toBe(415);
    expect(form.body).toEqual({ success: false, message: "Unsupported Media Type" });
    const data = new FormData();
    data.set("name", "x");
    const multipart = await t.request("POST", "/v1/media/libraries", { body: data });
    expect(multipart.status).toBe(415);
    const text = await t.request("POST", "/v1/media/libraries", {
      body: "name=x",
      headers: { "content-type": "text/plain" },
    });
    expect(text.status).toBe(415);
  });
});

describe("media OpenAPI", () => {
  it("documents every media operation, multipart bodies included, in a valid document", async () => {
    const t = await startTestApp();
    try {
      const doc = await t.request("GET", "/openapi.json", { anonymous: true });
      const paths = doc.body.paths as Record<
        string,
        Record<string, { operationId?: string; requestBody?: any }>
      >;
      const media = Object.entries(paths).filter(([path]) => path.startsWith("/v1/media/"));
      const operations = media.flatMap(([, methods]) =>
        Object.entries(methods).filter(([method]) => method !== "head"),
      );
      expect(operations.length).toBeGreaterThanOrEqual(29);
      for (const [, operation] of operations) expect(operation.operationId).toEqual(expect.any(String));
      const upload = paths["/v1/media/libraries/{libraryId}/videos/{videoId}/subtitles"]?.post;
      expect(Object.keys(upload?.requestBody?.content ?? {})).toEqual(["multipart/form-data"]);
      const result = await validate(structuredClone(doc.body));
      expect(result.valid, JSON.stringify(result)).toBe(true);
    } finally {
      await t.close();
    }
  });
});

describe("library lists", () => {
  let t: TestApp;
  let ids: string[];
  beforeAll(async () => {
    t = await startTestApp();
    ids = [];
    for (const [index, privacy] of ["public", "private", "unlisted", "public", "restricted"].entries()) {
      const library = await createLibrary(t, {
        name: `Lib ${index} ${privacy === "public" ? "Alpha" : "beta"}`,
        default_privacy: privacy,
      });
      ids.push(library.id);
    }
  });
  afterAll(() => t.close());

  it("pages newest first with meta and links", async () => {
    const first = await t.request("GET", "/v1/media/libraries?limit=2");
    expect(first.status).toBe(200);
    expect(first.body.data.map((l: { id: string }) => l.id)).toEqual([ids[4], ids[3]]);
    expect(first.body.meta).toEqual({
      pagination: { page: 1, page_size: 2, total: 5, total_pages: 3 },
      links: {
        self: "/v1/media/libraries?limit=2&page=1",
        first: "/v1/media/libraries?limit=2&page=1",
        last: "/v1/media/libraries?limit=2&page=3",
      },
    });
    const third = await t.request("GET", "/v1/media/libraries?limit=2&page=3");
    expect(third.body.data.map((l: { id: string }) => l.id)).toEqual([ids[0]]);
    const past = await t.request("GET", "/v1/media/libraries?limit=2&page=9");
    expect(past.status).toBe(200);
    expect(past.body.data).toEqual([]);
    // However far past the end (the largest page whose row offset is still an exact integer).
    for (const page of [10_000_001, 90_071_992_547_409]) {
      const far = await t.request("GET", `/v1/media/libraries?limit=100&page=${page}`);
      expect([far.status, far.body.data, far.body.meta.pagination.total]).toEqual([200, [], 5]);
    }
    const beyond = await t.request("GET", "/v1/media/libraries?page=90071992547410");
    expect(fieldErrors(beyond.body)).toEqual({ page: "validation_max" });
    const defaults = await t.request("GET", "/v1/media/libraries");
    expect(defaults.body.meta.pagination).toEqual({ page: 1, page_size: 20, total: 5, total_pages: 1 });
  });

  it("validates limit and page", async () => {
    const cases: [string, Record<string, string>][] = [
      ["limit=abc", { limit: "validation_type" }],
      ["limit=0", { limit: "validation_min" }],
      ["limit=101", { limit: "validation_max" }],
      ["page=0", { page: "validation_min" }],
      ["limit=-1", { limit: "validation_min" }],
      ["limit=5.5", { limit: "validation_type" }],
      // Only plain decimal text is a number here, though JavaScript reads these as 16, 10, 5 and 5.
      ["limit=0x10", { limit: "validation_type" }],
      ["limit=1e1", { limit: "validation_type" }],
      ["limit=%2B5", { limit: "validation_type" }],
      ["limit=%205", { limit: "validation_type" }],
      ["limit=", { limit: "validation_type" }],
      // Every failing field at once, the refused text beside a value out of range.
      ["limit=0x10&page=0", { limit: "validation_type", page: "validation_min" }],
    ];
    for (const [query, errors] of cases) {
      const response = await t.request("GET", `/v1/media/libraries?${query}`);
      expect(response.status).toBe(400);
      expect(fieldErrors(response.body)).toEqual(errors);
    }
    const decimal = await t.request("GET", "/v1/media/libraries?limit=007&page=1");
    expect(decimal.status).toBe(200);
    expect(decimal.body.meta.pagination.page_size).toBe(7);
  });

  it("filters by privacy, name and creation time, keeping filters in links", async () => {
    const publicOnes = await t.request("GET", "/v1/media/libraries?default_privacy=public");
    expect(publicOnes.body.data.map((l: { id: string }) => l.id)).toEqual([ids[3], ids[0]]);
    expect(publicOnes.body.meta.links.self).toBe(
      "/v1/media/libraries?limit=20&page=1&default_privacy=public",
    );
    const search = await t.request("GET", "/v1/media/libraries?search=ALPHA");
    expect(search.body.data).toHaveLength(2);
    const none = await t.request("GET", "/v1/media/libraries?search=%25");
    expect(none.body.data).toHaveLength(0);

    const all = (await t.request("GET", "/v1/media/libraries")).body.data as {
      id: string;
      created_at: string;
    }[];
    const middle = all.find((l) => l.id === ids[2]) as { created_at: string };
    const after = await t.request(
      "GET",
      `/v1/media/libraries?created_after=${encodeURIComponent(middle.created_at)}`,
    );
    expect(after.body.data.map((l: { id: string }) => l.id)).toContain(ids[2]);
    expect(after.body.data.map((l: { id: string }) => l.id)).not.toContain(ids[0]);
    const before = await t.request(
      "GET",
      `/v1/media/libraries?created_before=${encodeURIComponent(middle.created_at)}`,
    );
    expect(before.body.data.map((l: { id: string }) => l.id)).toContain(ids[2]);
    expect(before.body.data.map((l: { id: string }) => l.id)).not.toContain(ids[4]);
    // Bounds finer than the stored millisecond: half a millisecond later starts after it.
    const finer = (bound: string, time: string) =>
      t.request("GET", `/v1/media/libraries?${bound}=${encodeURIComponent(time.replace("Z", "5Z"))}`);
    expect(
      (await finer("created_after", middle.created_at)).body.data.map((l: { id: string }) => l.id),
    ).not.toContain(ids[2]);
    expect(
      (await finer("created_before", middle.created_at)).body.data.map((l: { id: string }) => l.id),
    ).toContain(ids[2]);
    const today = middle.created_at.slice(0, 10);
    const day = await t.request("GET", `/v1/media/libraries?created_after=${today}&created_before=${today}`);
    expect(day.body.meta.pagination.total).toBe(5);
    // Past year 9999 in UTC (an offset behind it): every library was made before it, none after.
    const lastHour = encodeURIComponent("9999-12-31T23:00:00-01:00");
    const beforeFar = await t.request("GET", `/v1/media/libraries?created_before=${lastHour}`);
    expect(beforeFar.status).toBe(200);
    const everyLibrary = await t.request("GET", "/v1/media/libraries");
    expect(beforeFar.body.meta.pagination.total).toBe(everyLibrary.body.meta.pagination.total);
    const afterFar = await t.request("GET", `/v1/media/libraries?created_after=${lastHour}`);
    expect(afterFar.status).toBe(200);
    expect(afterFar.body.meta.pagination.total).toBe(0);

    const bad = await t.request(
      "GET",
      "/v1/media/libraries?created_after=yesterday&created_before=2026-13-45&default_privacy=x",
    );
    expect(bad.status).toBe(400);
    expect(fieldErrors(bad.body)).toEqual({
      created_after: "validation_format",
      created_before: "validation_format",
      default_privacy: "validation_enum",
    });
  });

  it("searches names case-insensitively beyond ASCII, the same on both stores", async () => {
    const other = await t.createOrganization("Unicode names");
    const names = [
      "Élan vital",
      "ΣΊΣΥΦΟΣ",
      "Straße",
      "ǅemo",
      "Cafe\u0301 (decomposed)",
      "İstanbul",
      "GROẞE Halle",
      "\u212Aelvin",
    ];
    for (const name of names) {
      const created = await t.request("POST", "/v1/media/libraries", { json: { name }, key: other.key });
      expect(created.status).toBe(201);
    }
    const found = async (term: string) =>
      (
        await t.request("GET", `/v1/media/libraries?search=${encodeURIComponent(term)}`, { key: other.key })
      ).body.data
        .map((library: { name: string }) => library.name)
        .sort();
    for (const name of names) expect(await found(name)).toEqual([name]);
    expect(await found("élan")).toEqual(["Élan vital"]);
    expect(await found("ÉLAN")).toEqual(["Élan vital"]);
    // A term cut after a sigma, in either case; a final sigma is the same letter.
    expect(await found("σίσ")).toEqual(["ΣΊΣΥΦΟΣ"]);
    expect(await found("σίσυφος")).toEqual(["ΣΊΣΥΦΟΣ"]);
    expect(await found("STRASSE")).toEqual(["Straße"]);
    expect(await found("ǆemo")).toEqual(["ǅemo"]);
    // Letters whose upper case differs from their lower case's: ẞ (lower ß, upper SS), the Kelvin
    // sign (lower k), İ (lower i + combining dot).
    expect(await found("große")).toEqual(["GROẞE Halle"]);
    expect(await found("GROSSE")).toEqual(["GROẞE Halle"]);
    expect(await found("ẞ")).toEqual(["GROẞE Halle", "Straße"].sort());
    expect(await found("kelvin")).toEqual(["\u212Aelvin"]);
    expect(await found("İstanbul".toLowerCase())).toEqual(["İstanbul"]);
    // Composed and decomposed accents are one text.
    expect(await found("café")).toEqual(["Cafe\u0301 (decomposed)"]);
    expect(await found("e")).toEqual(
      ["Cafe\u0301 (decomposed)", "Straße", "ǅemo", "GROẞE Halle", "\u212Aelvin"].sort(),
    );
  });
});
