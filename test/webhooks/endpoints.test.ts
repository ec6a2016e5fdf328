import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Executor } from "../../src/store/transactions.ts";
import { fieldErrors } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { BLANK_TEXTS, blankError } from "../support/blank-text.ts";
import { testStoreKind } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import {
  createEndpoint,
  createLibrary,
  endpointRow,
  organizationOf,
  storedSecret,
  webhooksPath,
} from "./helpers.ts";

const OFFSET_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}\+00:00$/;

describe("webhook endpoints", () => {
  let t: TestApp;
  let libraryId: string;
  let organizationId: string;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" });
    organizationId = await organizationOf(t);
    libraryId = await createLibrary(t.cumulo.services, organizationId);
  });
  afterAll(() => t.close());

  it("creates an endpoint with a generated secret, null optional fields and offset times", async () => {
    const response = await t.request("POST", webhooksPath(libraryId), {
      json: { name: "Primary", url: "https://hooks.example.com/in", events: ["created", "ready"] },
    });
    expect(response.status).toBe(201);
    expect(response.body.success).toBe(true);
    const endpoint = response.body.data;
    expect(endpoint).toMatchObject({
      library_id: libraryId,
      organization_id: organizationId,
      name: "Primary",
      url: "https://hooks.example.com/in",
      events: ["created", "ready"],
      headers: null,
      retry_policy: null,
      is_active: true,
      updated_by: expect.any(String),
    });
    expect(endpoint.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(endpoint.created_by).toMatch(/^[0-9a-f-]{36}$/);
    expect(endpoint.created_at).toMatch(OFFSET_TIME);
    expect(endpoint.updated_at).toMatch(OFFSET_TIME);
    expect(endpoint.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(endpoint.secret.slice(6), "base64").length).toBeGreaterThanOrEqual(24);

    const fetched = await t.request("GET", `${webhooksPath(libraryId)}/${endpoint.id}`);
    expect(fetched.status).toBe(200);
    expect(fetched.body.data).toEqual(endpoint);
  });

  it("keeps headers, a retry policy (fractional seconds allowed) and is_active", async () => {
    const endpoint = await createEndpoint(t, libraryId, {
      url: "http://hooks.example.com/x",
      headers: { "X-Tenant": "42", "X-A": "1", Authorization: "Bearer z" },
      retry_policy: { max_attempts: 3, initial_delay_s: 0.5, multiplier: 2, max_delay_s: 60 },
      is_active: false,
    });
    // In the order given, on both stores.
    expect(Object.entries(endpoint.headers)).toEqual([
      ["X-Tenant", "42"],
      ["X-A", "1"],
      ["Authorization", "Bearer z"],
    ]);
    const read = await t.request("GET", `/v1/media/libraries/${libraryId}/webhooks/${endpoint.id}`);
    expect(Object.keys(read.body.data.headers)).toEqual(["X-Tenant", "X-A", "Authorization"]);
    expect(endpoint.retry_policy).toEqual({
      max_attempts: 3,
      initial_delay_s: 0.5,
      multiplier: 2,
      max_delay_s: 60,
    });
    expect(endpoint.is_active).toBe(false);
  });

  it("completes a partial retry policy with the documented defaults", async () => {
    const endpoint = await createEndpoint(t, libraryId, {
      url: "https://a.example.com/p",
      retry_policy: { max_attempts: 3 },
    });
    expect(endpoint.retry_policy).toEqual({
      max_attempts: 3,
      initial_delay_s: 5,
      multiplier: 2,
      max_delay_s: 36000,
    });
    const cleared = await t.request("PATCH", `${webhooksPath(libraryId)}/${endpoint.id}`, {
      json: { retry_policy: null },
    });
    expect(cleared.body.data.retry_policy).toBeNull();
  });

  it("reports every invalid field at once with the contract's codes", async () => {
    const response = await t.request("POST", webhooksPath(libraryId), {
      json: {
        url: 42,
        events: ["created", "exploded"],
        retry_policy: { max_attempts: 21, initial_delay_s: 0, multiplier: 0.5, max_delay_s: 10 },
        is_active: "yes",
      },
    });
    expect(response.status).toBe(400);
    expect(response.body.message).toBe("Invalid Request");
    const byField = Object.fromEntries(
      (response.body.errors as { field: string; code: string }[]).map((e) => [e.field, e.code]),
    );
    expect(byField).toEqual({
      name: "validation_required",
      url: "validation_type",
      "events.1": "validation_enum",
      "retry_policy.max_attempts": "validation_max",
      "retry_policy.initial_delay_s": "validation_min",
      "retry_policy.multiplier": "validation_min",
      is_active: "validation_type",
    });

    // Waits past what the store's dates can hold are refused (30 days at most).
    const tooLong = await t.request("POST", webhooksPath(libraryId), {
      json: {
        name: "n",
        url: "https://a.example.com",
        events: ["*"],
        retry_policy: { initial_delay_s: 1e15, multiplier: 101, max_delay_s: 30 * 86_400 + 1 },
      },
    });
    expect(
      Object.fromEntries(tooLong.body.errors.map((e: { field: string; code: string }) => [e.field, e.code])),
    ).toEqual({
      "retry_policy.initial_delay_s": "validation_max",
      "retry_policy.multiplier": "validation_max",
      "retry_policy.max_delay_s": "validation_max",
    });

    const empty = await t.request("POST", webhooksPath(libraryId), {
      json: { name: "n", url: "https://a.example.com", events: [] },
    });
    expect(empty.body.errors).toEqual([expect.objectContaining({ field: "events", code: "validation_min" })]);

    // a url of the wrong scheme is reported with the other failing fields, not after them
    const together = await t.request("POST", webhooksPath(libraryId), {
      json: { name: "", url: "ftp://example.com/x", events: ["*"] },
    });
    expect(together.body.errors).toEqual([
      expect.objectContaining({ field: "name", code: "validation_min" }),
      expect.objectContaining({ field: "url", code: "validation_format" }),
    ]);
  });

  it("refuses URLs that are not http(s) and bad custom headers", async () => {
    for (const url of ["ftp://example.com/x", "not a url", "javascript:alert(1)", "http://"]) {
      const response = await t.request("POST", webhooksPath(libraryId), {
        json: { name: "n", url, events: ["*"] },
      });
      expect(response.status, url).toBe(400);
      expect(response.body.errors).toEqual([
        expect.objectContaining({ field: "url", code: "validation_format" }),
      ]);
    }
    const headers = await t.request("POST", webhooksPath(libraryId), {
      json: {
        name: "n",
        url: "https://a.example.com",
        events: ["*"],
        headers: { "Bad Name": "x", Ok: "a\r\nb" },
      },
    });
    expect(headers.status).toBe(400);
    expect(headers.body.errors.map((e: { field: string }) => e.field).sort()).toEqual([
      "headers.Bad Name",
      "headers.Ok",
    ]);
  });

  it("refuses a URL carrying a user name or password, which would never be sent", async () => {
    for (const url of ["https://user:pass@a.example.com/hook", "https://token@a.example.com/hook"]) {
      const created = await t.request("POST", webhooksPath(libraryId), {
        json: { name: "n", url, events: ["*"] },
      });
      expect(created.status, url).toBe(400);
      expect(created.body.errors, url).toEqual([
        expect.objectContaining({
          field: "url",
          code: "validation_format",
          message: expect.stringContaining("headers"),
        }),
      ]);
    }
    const endpoint = await createEndpoint(t, libraryId, { url: "https://a.example.com/hook" });
    const patched = await t.request("PATCH", `${webhooksPath(libraryId)}/${endpoint.id}`, {
      json: { url: "https://user:pass@a.example.com/hook" },
    });
    expect(patched.status).toBe(400);
    expect(patched.body.errors).toEqual([
      expect.objectContaining({ field: "url", code: "validation_format" }),
    ]);
    expect((await t.request("GET", `${webhooksPath(libraryId)}/${endpoint.id}`)).body.data.url).toBe(
      "https://a.example.com/hook",
    );
  });

  it("reports a bad URL and bad header values together with the other fields' errors", async () => {
    const response = await t.request("POST", webhooksPath(libraryId), {
      json: {
        name: "",
        url: "ftp://example.com/x",
        events: ["bogus"],
        headers: { Ok: "a\r\nb", "Bad Name": "x" },
      },
    });
    expect(response.status).toBe(400);
    const byField = Object.fromEntries(
      (response.body.errors as { field: string; code: string }[]).map((e) => [e.field, e.code]),
    );
    expect(byField).toEqual({
      name: "validation_min",
      url: "validation_format",
      "events.0": "validation_enum",
      "headers.Ok": "validation_format",
      "headers.Bad Name": "validation_format",
    });
    // A character beyond Latin-1 is named as the reason, not control characters (QA, session 42).
    const euro = await t.request("POST", webhooksPath(libraryId), {
      json: { name: "euro", url: "https://a.example.com/x", events: ["*"], headers: { "X-Price": "5 €" } },
    });
    expect(euro.body.errors).toEqual([
      expect.objectContaining({ field: "headers.X-Price", message: expect.stringContaining("Latin-1") }),
    ]);
    const endpoint = await createEndpoint(t, libraryId, { url: "https://a.example.com/both" });
    const patched = await t.request("PATCH", `${webhooksPath(libraryId)}/${endpoint.id}`, {
      json: { url: "not a url", is_active: "no" },
    });
    expect(patched.status).toBe(400);
    expect(patched.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(["is_active", "url"]);
  });

  it("refuses a blank name on create and update, and keeps a name with spaces around it as sent", async () => {
    const endpoint = await createEndpoint(t, libraryId, {
      name: " Spaced ",
      url: "https://a.example.com/hook",
    });
    expect(endpoint.name).toBe(" Spaced ");
    const path = `${webhooksPath(libraryId)}/${endpoint.id}`;
    const before = (await t.request("GET", webhooksPath(libraryId))).body.meta.pagination.total;
    for (const name of BLANK_TEXTS) {
      const created = await t.request("POST", webhooksPath(libraryId), {
        json: { name, url: "https://a.example.com/hook", events: ["*"] },
      });
      expect(created.status).toBe(400);
      expect(created.body).toEqual({
        success: false,
        message: "Invalid Request",
        errors: [blankError("name")],
      });
      const patched = await t.request("PATCH", path, { json: { name, is_active: false } });
      expect(patched.status).toBe(400);
      expect(patched.body.errors).toEqual([blankError("name")]);
    }
    expect((await t.request("GET", webhooksPath(libraryId))).body.meta.pagination.total).toBe(before);
    expect((await t.request("GET", path)).body.data).toMatchObject({ name: " Spaced ", is_active: true });
  });

  it("updates fields with PATCH, clears headers with null and checks the new URL", async () => {
    const endpoint = await createEndpoint(t, libraryId, {
      url: "https://a.example.com/hook",
      headers: { "X-A": "1" },
    });
    const patched = await t.request("PATCH", `${webhooksPath(libraryId)}/${endpoint.id}`, {
      json: { name: "Renamed", events: ["deleted"], headers: null, is_active: false },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.data).toMatchObject({
      name: "Renamed",
      events: ["deleted"],
      headers: null,
      is_active: false,
      url: "https://a.example.com/hook",
      secret: endpoint.secret,
      created_at: endpoint.created_at,
    });
    const bad = await t.request("PATCH", `${webhooksPath(libraryId)}/${endpoint.id}`, {
      json: { url: "gopher://x" },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0]).toMatchObject({ field: "url", code: "validation_format" });
  });

  it("takes bodyless operations with an empty JSON body, and refuses malformed JSON", async () => {
    const endpoint = await createEndpoint(t, libraryId, { url: "https://a.example.com/e" });
    const rotated = await t.request("POST", `${webhooksPath(libraryId)}/${endpoint.id}/rotate-secret`, {
      headers: { "content-type": "application/json" },
    });
    expect(rotated.status).toBe(200);
    const tested = await t.request("POST", `${webhooksPath(libraryId)}/${endpoint.id}/test`, {
      headers: { "content-type": "application/json" },
      body: "",
    });
    expect(tested.status).toBe(202);
    const malformed = await t.request("POST", webhooksPath(libraryId), {
      headers: { "content-type": "application/json" },
      body: '{"name": "x",',
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ success: false, message: "Invalid Request" });
    const empty = await t.request("POST", webhooksPath(libraryId), {
      headers: { "content-type": "application/json" },
    });
    expect(empty.status).toBe(400);
    expect(empty.body.message).toBe("Invalid Request");
    const text = await t.request("POST", webhooksPath(libraryId), {
      headers: { "content-type": "text/plain" },
      body: "hi",
    });
    expect(text.status).toBe(415);
  });

  it("rotates the secret", async () => {
    const endpoint = await createEndpoint(t, libraryId, { url: "https://a.example.com/r" });
    const rotated = await t.request("POST", `${webhooksPath(libraryId)}/${endpoint.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    expect(rotated.body.data.secret).toMatch(/^whsec_/);
    expect(rotated.body.data.secret).not.toBe(endpoint.secret);
    const fetched = await t.request("GET", `${webhooksPath(libraryId)}/${endpoint.id}`);
    expect(fetched.body.data.secret).toBe(rotated.body.data.secret);
    expect(fetched.body.data.previous_secret_expires_at).toBeUndefined();
  });

  it("keeps the replaced secret sealed for the overlap asked for, never showing it again", async () => {
    const endpoint = await createEndpoint(t, libraryId, { url: "https://a.example.com/overlap" });
    const endpointPath = `${webhooksPath(libraryId)}/${endpoint.id}`;
    const stored = () =>
      t.cumulo.store.db
        .selectFrom("webhook_endpoints")
        .select(["previous_secret", "previous_secret_expires_at"])
        .where("id", "=", endpoint.id)
        .executeTakeFirstOrThrow();
    // The row as a version before sealing kept it: the secret moves to previous_secret sealed all the same.
    await t.cumulo.store.db
      .updateTable("webhook_endpoints")
      .set({ secret: endpoint.secret })
      .where("id", "=", endpoint.id)
      .execute();
    const before = Date.now();
    const rotated = await t.request("POST", `${endpointPath}/rotate-secret`, {
      json: { previous_secret_expires_in_s: 3600 },
    });
    expect(rotated.status).toBe(200);
    const expiresAt = rotated.body.data.previous_secret_expires_at as string;
    expect(expiresAt).toMatch(OFFSET_TIME);
    expect(Date.parse(expiresAt) - before).toBeGreaterThanOrEqual(3_600_000);
    expect(Date.parse(expiresAt) - Date.now()).toBeLessThanOrEqual(3_600_000);
    const { previous_secret } = await stored();
    expect(previous_secret).toMatch(/^v1\./);
    expect(previous_secret).not.toContain(endpoint.secret.slice("whsec_".length));
    const views = [
      rotated,
      await t.request("GET", endpointPath),
      await t.request("GET", webhooksPath(libraryId)),
    ];
    for (const view of views) expect(view.text).not.toContain(endpoint.secret.slice("whsec_".length));
    expect(views[1]!.body.data.previous_secret_expires_at).toBe(expiresAt);

    // Without a body, with an empty one or with `{}`, the previous secret goes at once.
    for (const options of [{}, { headers: { "content-type": "application/json" } }, { json: {} }]) {
      await t.request("POST", `${endpointPath}/rotate-secret`, {
        json: { previous_secret_expires_in_s: 60 },
      });
      const plain = await t.request("POST", `${endpointPath}/rotate-secret`, options);
      expect(plain.status).toBe(200);
      expect(plain.body.data.previous_secret_expires_at).toBeUndefined();
      expect(await stored()).toEqual({ previous_secret: null, previous_secret_expires_at: null });
    }
  });

  it("refuses an overlap that is not a whole number of seconds from 0 to 7 days", async () => {
    const endpoint = await createEndpoint(t, libraryId, { url: "https://a.example.com/overlap-bad" });
    const codeOf = async (value: unknown) => {
      const response = await t.request("POST", `${webhooksPath(libraryId)}/${endpoint.id}/rotate-secret`, {
        json: { previous_secret_expires_in_s: value },
      });
      expect(response.status).toBe(400);
      return fieldErrors(response.body);
    };
    expect(await codeOf(-1)).toEqual({ previous_secret_expires_in_s: "validation_min" });
    expect(await codeOf(604_801)).toEqual({ previous_secret_expires_in_s: "validation_max" });
    expect(await codeOf("60")).toEqual({ previous_secret_expires_in_s: "validation_type" });
    expect(await codeOf(1.5)).toEqual({ previous_secret_expires_in_s: "validation_type" });
    const fetched = await t.request("GET", `${webhooksPath(libraryId)}/${endpoint.id}`);
    expect(fetched.body.data.secret).toBe(endpoint.secret);
    const longest = await t.request("POST", `${webhooksPath(libraryId)}/${endpoint.id}/rotate-secret`, {
      json: { previous_secret_expires_in_s: 604_800 },
    });
    expect(longest.status).toBe(200);
  });

  it("keeps secrets sealed in the store, each bound to its endpoint", async () => {
    const expectSealed = (stored: string, secret: string) => {
      expect(stored).toMatch(/^v1\./);
      expect(stored).not.toContain("whsec_");
      expect(stored).not.toContain(secret.slice("whsec_".length));
    };
    const first = await createEndpoint(t, libraryId, { url: "https://a.example.com/sealed" });
    expectSealed(await storedSecret(t, first.id), first.secret);
    const rotated = (await t.request("POST", `${webhooksPath(libraryId)}/${first.id}/rotate-secret`)).body
      .data;
    expectSealed(await storedSecret(t, first.id), rotated.secret);
    expect((await t.request("GET", `${webhooksPath(libraryId)}/${first.id}`)).body.data.secret).toBe(
      rotated.secret,
    );

    // Another endpoint's sealed secret copied onto this row does not open as this endpoint's.
    const second = await createEndpoint(t, libraryId, { url: "https://a.example.com/copied" });
    await t.cumulo.store.db
      .updateTable("webhook_endpoints")
      .set({ secret: await storedSecret(t, first.id) })
      .where("id", "=", second.id)
      .execute();
    const copied = await t.request("GET", `${webhooksPath(libraryId)}/${second.id}`);
    expect(copied.status).toBe(503);
    expect(copied.text).not.toContain(rotated.secret);
    await t.request("DELETE", `${webhooksPath(libraryId)}/${second.id}`);
  });

  /** `count` endpoints of the library, written as the API writes them, in `executor`'s transaction. */
  const seedEndpoints = (library: string, count: number, executor: Executor = t.cumulo.store.db) =>
    executor
      .insertInto("webhook_endpoints")
      .values(
        Array.from({ length: count }, (_, i) =>
          endpointRow(organizationId, library, { name: `seeded ${i}`, url: "https://a.example.com/seeded" }),
        ),
      )
      .execute();
  const createIn = (library: string, name: string) =>
    t.request("POST", webhooksPath(library), {
      json: { name, url: "https://a.example.com/race", events: ["*"] },
    });
  const LIMIT_MESSAGE =
    "This library already has 100 webhook endpoints, the most it may have; delete one to add another";

  it("refuses an endpoint past the library's limit (100) with 409, also when creates race", async () => {
    const library = await createLibrary(t.cumulo.services, organizationId);
    await seedEndpoints(library, 95);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => createIn(library, `racing ${i}`)));
    expect(answers.map((answer) => answer.status).sort()).toEqual([
      ...Array(5).fill(201),
      ...Array(5).fill(409),
    ]);
    expect(answers.find((answer) => answer.status === 409)?.body).toEqual({
      success: false,
      message: LIMIT_MESSAGE,
    });
    const listed = await t.request("GET", `${webhooksPath(library)}?limit=1`);
    expect(listed.body.meta.pagination.total).toBe(100);

    // A deletion makes room for one; other libraries are not affected.
    const [someone] = listed.body.data;
    await t.request("DELETE", `${webhooksPath(library)}/${someone.id}`);
    expect((await createIn(library, "after a deletion")).status).toBe(201);
    expect((await createIn(library, "one too many")).status).toBe(409);
    const elsewhere = await createLibrary(t.cumulo.services, organizationId);
    expect((await createIn(elsewhere, "another library")).status).toBe(201);
  });

  it.runIf(testStoreKind() === "postgres")(
    "counts a library's endpoints only after a create of it in progress has committed (PostgreSQL)",
    async () => {
      const library = await createLibrary(t.cumulo.services, organizationId);
      await seedEndpoints(library, 99);
      const db = t.cumulo.store.db;
      const waitingForLocks = async () =>
        (
          await sql<{ waiting: number }>`select count(*)::int as waiting from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock'`.execute(db)
        ).rows[0]?.waiting ?? 0;
      // Another create of the library, held open after writing the 100th endpoint: the API's create
      // waits for it and then finds the library full (counted before it, it would have made a 101st).
      const { pending } = await db.transaction().execute(async (trx) => {
        await t.cumulo.services.libraries.lockLibrary(trx, organizationId, library);
        await seedEndpoints(library, 1, trx);
        let answered = false;
        const pending = createIn(library, "while another create commits").finally(() => {
          answered = true;
        });
        await waitUntil(async () => answered || (await waitingForLocks()) > 0 || undefined);
        // Wrapped: a promise returned as it is would be awaited before this transaction commits.
        return { pending };
      });
      const answer = await pending;
      expect(answer.status).toBe(409);
      expect(answer.body.message).toBe(LIMIT_MESSAGE);
      const listed = await t.request("GET", `${webhooksPath(library)}?limit=1`);
      expect(listed.body.meta.pagination.total).toBe(100);
    },
  );

  it("deletes an endpoint; afterwards it is not found", async () => {
    const endpoint = await createEndpoint(t, libraryId, { url: "https://a.example.com/d" });
    const deleted = await t.request("DELETE", `${webhooksPath(libraryId)}/${endpoint.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body.success).toBe(true);
    expect((await t.request("GET", `${webhooksPath(libraryId)}/${endpoint.id}`)).status).toBe(404);
    expect((await t.request("DELETE", `${webhooksPath(libraryId)}/${endpoint.id}`)).status).toBe(404);
  });

  it("lists endpoints newest first with pagination meta", async () => {
    const library = await createLibrary(t.cumulo.services, organizationId);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await createEndpoint(t, library, { name: `e${i}`, url: "https://a.example.com" })).id);
      await new Promise((resolve) => setTimeout(resolve, 3));
    }
    const page1 = await t.request("GET", `${webhooksPath(library)}?limit=2&page=1`);
    expect(page1.status).toBe(200);
    expect(page1.body.data.map((e: { id: string }) => e.id)).toEqual([ids[2], ids[1]]);
    expect(page1.body.meta).toEqual({
      pagination: { page: 1, page_size: 2, total: 3, total_pages: 2 },
      links: {
        self: `${webhooksPath(library)}?limit=2&page=1`,
        first: `${webhooksPath(library)}?limit=2&page=1`,
        last: `${webhooksPath(library)}?limit=2&page=2`,
      },
    });
    const page2 = await t.request("GET", `${webhooksPath(library)}?limit=2&page=2`);
    expect(page2.body.data.map((e: { id: string }) => e.id)).toEqual([ids[0]]);
    const past = await t.request("GET", `${webhooksPath(library)}?limit=2&page=9`);
    expect(past.status).toBe(200);
    expect(past.body.data).toEqual([]);
    const bad = await t.request("GET", `${webhooksPath(library)}?limit=0`);
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0]).toMatchObject({ field: "limit", code: "validation_min" });
  });

  it("answers 404 for an unknown library, a malformed id and an endpoint under another library", async () => {
    expect((await t.request("GET", webhooksPath(randomUUID()))).status).toBe(404);
    expect((await t.request("GET", webhooksPath("not-a-uuid"))).status).toBe(404);
    const missing = await t.request("POST", webhooksPath(randomUUID()), {
      json: { name: "n", url: "https://a.example.com", events: ["*"] },
    });
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual({ success: false, message: "Resource not found" });

    const endpoint = await createEndpoint(t, libraryId, { url: "https://a.example.com/iso" });
    const other = await t.createOrganization("Webhook rival");
    const otherLibrary = await createLibrary(t.cumulo.services, other.organizationId);
    const path = `${webhooksPath(libraryId)}/${endpoint.id}`;
    // Other organizations on this library's routes: test/core/auth-matrix.test.ts. Nor is the endpoint
    // reachable through the other organization's own library.
    const crossed = await t.request("GET", `${webhooksPath(otherLibrary)}/${endpoint.id}`, {
      key: other.key,
    });
    expect(crossed.status).toBe(404);
    const still = await t.request("GET", path);
    expect(still.body.data.name).toBe(endpoint.name);
  });

  it("documents every route in the OpenAPI document", async () => {
    const doc = await t.request("GET", "/openapi.json", { anonymous: true });
    const paths = Object.keys(doc.body.paths).filter((p) => p.includes("/webhooks"));
    expect(paths.sort()).toEqual([
      "/v1/media/libraries/{libraryId}/webhooks",
      "/v1/media/libraries/{libraryId}/webhooks/{endpointId}",
      "/v1/media/libraries/{libraryId}/webhooks/{endpointId}/events",
      "/v1/media/libraries/{libraryId}/webhooks/{endpointId}/events/{deliveryId}/retry",
      "/v1/media/libraries/{libraryId}/webhooks/{endpointId}/rotate-secret",
      "/v1/media/libraries/{libraryId}/webhooks/{endpointId}/test",
    ]);
    // A delivery's video data is typed field by field, as SPEC.md lists them (it was any object).
    const events = doc.body.paths["/v1/media/libraries/{libraryId}/webhooks/{endpointId}/events"].get;
    let answer = events.responses["200"];
    if (answer.$ref) answer = doc.body.components.responses[answer.$ref.split("/").pop()];
    const delivery = answer.content["application/json"].schema.properties.data.items;
    expect(delivery.properties.payload.properties.payload.properties).toMatchObject({
      status: { type: "string" },
      duration: { type: "integer" },
      thumbnail_count: { type: "integer" },
      libraryId: { type: "string" },
    });
  });
});

describe("webhook URL safety at create", () => {
  let t: TestApp;
  let libraryId: string;
  beforeAll(async () => {
    t = await startTestApp();
    libraryId = await createLibrary(t.cumulo.services, await organizationOf(t));
  });
  afterAll(() => t.close());

  it("refuses loopback, private, link-local, CGNAT, metadata and IPv4-mapped targets", async () => {
    const urls = [
      "http://127.0.0.1:8080/hook",
      "http://localhost/hook",
      "http://10.1.2.3/hook",
      "http://192.168.0.10/hook",
      "http://169.254.169.254/latest/meta-data",
      "http://100.64.0.1/hook",
      "http://[::1]/hook",
      "http://[::ffff:127.0.0.1]/hook",
      "http://[::127.0.0.1]/hook",
      "http://0.0.0.0/hook",
    ];
    for (const url of urls) {
      const response = await t.request("POST", webhooksPath(libraryId), {
        json: { name: "n", url, events: ["*"] },
      });
      expect(response.status, url).toBe(400);
      expect(response.body.errors, url).toEqual([
        expect.objectContaining({ field: "url", code: "validation_format" }),
      ]);
    }
    // a name is refused without telling the internal address it resolves to
    const named = await t.request("POST", webhooksPath(libraryId), {
      json: { name: "n", url: "http://localhost:8080/hook", events: ["*"] },
    });
    expect(named.body.errors).toEqual([
      {
        field: "url",
        code: "validation_format",
        message:
          "The url field must reach a public address: localhost resolves to a loopback, private or reserved address.",
      },
    ]);
    // reported with the body's other failing fields, in one answer
    const several = await t.request("POST", webhooksPath(libraryId), {
      json: { name: "", url: "http://127.0.0.1/hook", events: ["bogus"] },
    });
    expect(several.status).toBe(400);
    expect(fieldErrors(several.body)).toEqual({
      name: "validation_min",
      "events.0": "validation_enum",
      url: "validation_format",
    });
    // a name that does not resolve names no private address: accepted, and checked again at send time
    const unresolved = await t.request("POST", webhooksPath(libraryId), {
      json: { name: "n", url: "https://hooks.does-not-exist.invalid/hook", events: ["*"] },
    });
    expect(unresolved.status).toBe(201);
    const endpoint = await createEndpoint(t, libraryId, { url: "https://93.184.215.14/hook" });
    const patched = await t.request("PATCH", `${webhooksPath(libraryId)}/${endpoint.id}`, {
      json: { url: "http://127.0.0.1/hook" },
    });
    expect(patched.status).toBe(400);
    expect(patched.body.errors[0]).toMatchObject({ field: "url", code: "validation_format" });
    const patchedWithOthers = await t.request("PATCH", `${webhooksPath(libraryId)}/${endpoint.id}`, {
      json: { url: "http://10.1.2.3/hook", is_active: "yes" },
    });
    expect(fieldErrors(patchedWithOthers.body)).toEqual({
      is_active: "validation_type",
      url: "validation_format",
    });
  });
});
