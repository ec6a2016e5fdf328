import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createConsoleUser, type SignedIn, signIn, withSession } from "../support/console.ts";

/** One write of each API group, as the console makes it, with the status it answers on success. */
function writes(libraryId: string) {
  return [
    {
      group: "media",
      method: "POST",
      path: "/v1/media/libraries",
      json: { name: "From the console" },
      ok: 201,
    },
    {
      group: "webhooks",
      method: "POST",
      path: `/v1/media/libraries/${libraryId}/webhooks`,
      json: { name: "Console hook", url: "https://hooks.example.invalid/in", events: ["*"] },
      ok: 201,
    },
    {
      group: "cdn",
      method: "POST",
      path: "/v1/cdn/distributions",
      json: { hostname: `console-${Date.now()}.example.com`, origin_url: "https://origin.example.invalid" },
      ok: 201,
    },
    { group: "cloud", method: "POST", path: "/v1/storage/disks", json: { size_gb: 10 }, ok: 200 },
    {
      group: "organization",
      method: "POST",
      path: "/v1/organization/api-keys",
      json: { name: "k" },
      ok: 201,
    },
  ] as const;
}

const READS = [
  "/v1/media/libraries",
  "/v1/cdn/distributions",
  "/v1/livestream/health",
  "/v1/user-resource/vm/list",
  "/v1/storage/disks",
  "/v1/organization/api-keys",
];

const csrfRefused = (group: string, body: any) =>
  group === "cloud"
    ? body.error === "forbidden" && !("success" in body)
    : body.success === false && body.error === "forbidden" && body.code === "csrf_token_invalid";

describe("a console session on every API group", () => {
  let t: TestApp;
  let admin: SignedIn;
  let reader: SignedIn;
  let libraryId: string;
  beforeAll(async () => {
    t = await startTestApp();
    await createConsoleUser(t, { email: "admin@example.test" });
    await createConsoleUser(t, { email: "reader@example.test", readOnly: true });
    admin = await signIn(t, "admin@example.test");
    reader = await signIn(t, "reader@example.test");
    libraryId = (await t.request("POST", "/v1/media/libraries", { json: { name: "Shared" } })).body.data.id;
  });
  afterAll(() => t.close());

  it("reads every group with the cookie alone", async () => {
    for (const path of [...READS, `/v1/media/libraries/${libraryId}/webhooks`]) {
      for (const session of [admin, reader]) {
        const response = await t.request("GET", path, withSession(session, false));
        expect(response.status, `${path}: ${response.text}`).toBe(200);
      }
    }
  });

  it("refuses writes without the CSRF token or with a wrong one, in each group's shape", async () => {
    for (const write of writes(libraryId)) {
      for (const csrf of [false, "wrong", `${admin.csrf}x`, reader.csrf] as const) {
        const response = await t.request(write.method, write.path, {
          ...withSession(admin, csrf),
          json: write.json,
        });
        expect(response.status, `${write.path} ${csrf}`).toBe(403);
        expect(csrfRefused(write.group, response.body), response.text).toBe(true);
      }
    }
    // Nothing was made.
    const libraries = await t.request("GET", "/v1/media/libraries");
    expect(libraries.body.data.map((library: { name: string }) => library.name)).toEqual(["Shared"]);
  });

  it("accepts writes carrying the session's CSRF token, acting as the session's organization", async () => {
    for (const write of writes(libraryId)) {
      const response = await t.request(write.method, write.path, { ...withSession(admin), json: write.json });
      expect(response.status, `${write.path}: ${response.text}`).toBe(write.ok);
    }
    // Made in the admin key's organization: the key sees the console's library.
    const libraries = await t.request("GET", "/v1/media/libraries");
    expect(libraries.body.data.map((library: { name: string }) => library.name)).toContain(
      "From the console",
    );
  });

  it("refuses every write of a read-only user (403), CSRF token or not, and lets them read", async () => {
    for (const write of writes(libraryId)) {
      const response = await t.request(write.method, write.path, {
        ...withSession(reader),
        json: write.json,
      });
      expect(response.status, write.path).toBe(403);
      expect(response.body.error).toBe("forbidden");
      expect(response.body.message).toBe("This user is read-only");
    }
    const library = await t.request("GET", `/v1/media/libraries/${libraryId}`, withSession(reader, false));
    expect(library.status).toBe(200);
    const removal = await t.request("DELETE", `/v1/media/libraries/${libraryId}`, withSession(reader));
    expect(removal.status).toBe(403);
    expect((await t.request("GET", `/v1/media/libraries/${libraryId}`)).status).toBe(200);
  });

  it("lets a read-only user, not a read-only key, get a playback token to watch a private video", async () => {
    const video = await t.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
      json: { title: "Watch" },
    });
    const tokenPath = `/v1/media/libraries/${libraryId}/videos/${video.body.data.id}/playback-token`;
    const watched = await t.request("POST", tokenPath, { ...withSession(reader), json: {} });
    expect(watched.status, watched.text).toBe(201);
    expect(watched.body.data.token).toEqual(expect.any(String));
    // Still a write as far as the CSRF check goes.
    expect((await t.request("POST", tokenPath, { ...withSession(reader, false), json: {} })).status).toBe(
      403,
    );
    const readOnlyKey = await t.request("POST", "/v1/organization/api-keys", {
      json: { name: "dashboard", read_only: true },
    });
    const refused = await t.request("POST", tokenPath, { key: readOnlyKey.body.data.api_key, json: {} });
    expect([refused.status, refused.body.message]).toEqual([403, "This API key is read-only"]);
  });

  it("prefers an API key header over the cookie: key requests need no CSRF token", async () => {
    const response = await t.request("POST", "/v1/media/libraries", {
      json: { name: "By key" },
      headers: { cookie: reader.cookie },
    });
    // The admin key (not the read-only user's cookie) decided.
    expect(response.status).toBe(201);
  });
});

describe("tenant isolation of console sessions", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it("shows a session of organization B nothing of organization A", async () => {
    const other = await t.createOrganization("Org B");
    await createConsoleUser(t, { email: "b@example.test", organizationId: other.organizationId });
    const b = await signIn(t, "b@example.test");
    expect(b.session.organization).toEqual({ id: other.organizationId, name: "Org B" });

    const library = (await t.request("POST", "/v1/media/libraries", { json: { name: "A's library" } })).body
      .data;
    const key = (await t.request("POST", "/v1/organization/api-keys", { json: { name: "A's key" } })).body
      .data;

    const list = await t.request("GET", "/v1/media/libraries", withSession(b, false));
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([]);
    expect((await t.request("GET", `/v1/media/libraries/${library.id}`, withSession(b, false))).status).toBe(
      404,
    );
    const deletion = await t.request("DELETE", `/v1/media/libraries/${library.id}`, withSession(b));
    expect(deletion.status).toBe(404);
    const keys = await t.request("GET", "/v1/organization/api-keys", withSession(b, false));
    expect(keys.body.data.map((k: { name: string }) => k.name)).not.toContain("A's key");
    expect((await t.request("DELETE", `/v1/organization/api-keys/${key.id}`, withSession(b))).status).toBe(
      404,
    );
    // A's things are untouched.
    expect((await t.request("GET", `/v1/media/libraries/${library.id}`)).status).toBe(200);
    expect((await t.request("GET", "/v1/media/libraries", { key: key.api_key })).status).toBe(200);
  });
});

describe("a GET that creates, with a console session", () => {
  // SPEC.md has `GET /storage/user` create the object-storage user and a key pair when none exist.
  // A page on the same site (a tenant's page on the edge) can make a signed-in browser send it, so
  // with the cookie it needs the CSRF token, as a write does (docs/console.md, CSRF).
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  async function organizationWithSession(name: string, email: string) {
    const org = await t.createOrganization(name);
    await createConsoleUser(t, { email, organizationId: org.organizationId });
    const readOnly = await t.cumulo.services.identity.createApiKey(org.organizationId, {
      name: "ro",
      readOnly: true,
    });
    if (readOnly.outcome !== "created") throw new Error("key not created");
    return { ...org, session: await signIn(t, email), readOnlyKey: readOnly.api_key };
  }

  /** A read-only key is refused `GET /storage/user` exactly while the user does not exist. */
  const storageUserExists = async (readOnlyKey: string) =>
    (await t.cloud("GET", "/v1/storage/user", { key: readOnlyKey })).status === 200;

  it("refuses the cookie without the session's token (403) and creates nothing", async () => {
    const org = await organizationWithSession("Storage by cookie", "storage@example.test");
    const other = await signIn(t, (await createConsoleUser(t, { email: "other@example.test" })).email);
    for (const path of ["/v1/storage/user", "/v1/storage/user/keys", "/v1/cloud/storage/user"]) {
      for (const method of ["GET", "HEAD"]) {
        for (const csrf of [false, "wrong", other.csrf] as const) {
          const response = await t.request(method, path, withSession(org.session, csrf));
          expect(response.status, `${method} ${path} ${csrf}`).toBe(403);
          if (method === "GET") expect(csrfRefused("cloud", response.body), response.text).toBe(true);
        }
      }
    }
    expect(await storageUserExists(org.readOnlyKey)).toBe(false);
  });

  it("creates the user and its key pair with the session's token", async () => {
    const org = await organizationWithSession("Storage with token", "token@example.test");
    const user = await t.request("GET", "/v1/storage/user", withSession(org.session));
    expect(user.status, user.text).toBe(200);
    expect(user.body.s3Credentials).toEqual([
      expect.objectContaining({ secretKey: expect.stringMatching(/^[A-Za-z0-9+/]{40}$/) }),
    ]);
    const keys = await t.request("GET", "/v1/storage/user/keys", withSession(org.session));
    expect(keys.body).toEqual(user.body.s3Credentials);
    expect(await storageUserExists(org.readOnlyKey)).toBe(true);
  });

  it("needs no token with an API key, and other reads none with the cookie", async () => {
    const org = await organizationWithSession("Storage by key", "key@example.test");
    const user = await t.cloud("GET", "/v1/storage/user", { key: org.key });
    expect(user.status, user.text).toBe(200);
    expect(user.body.s3Credentials).toHaveLength(1);
    const byHeader = await t.request("GET", "/v1/storage/user/keys", {
      anonymous: true,
      headers: { "x-api-key": org.key },
    });
    expect(byHeader.body).toEqual(user.body.s3Credentials);
    // The endpoint URL creates nothing: the cookie alone reads it.
    expect((await t.request("GET", "/v1/storage/api/s3", withSession(org.session, false))).status).toBe(200);
  });
});
