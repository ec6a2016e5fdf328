import { validate } from "@readme/openapi-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sendRaw } from "../fuzz/raw-http.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createTestStore, testStoreKind } from "../support/store.ts";

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

  it("keeps every answer out of shared caches and challenges a missing credential", async () => {
    // Kept answers too: the second read of the same list is served from the response cache.
    for (let read = 0; read < 2; read += 1) {
      const libraries = await t.request("GET", "/v1/media/libraries");
      expect(libraries.headers.get("cache-control")).toBe("no-store");
    }
    const cloud = await t.cloud("GET", "/v1/storage/user");
    expect(cloud.status).toBe(200);
    expect(cloud.headers.get("cache-control")).toBe("no-store");
    const media = await t.request("GET", "/v1/media/libraries", { anonymous: true });
    expect(media.status).toBe(401);
    expect(media.headers.get("www-authenticate")).toBe('Bearer realm="Cumulo"');
    const cloudRefused = await t.cloud("GET", "/v1/storage/user", { anonymous: true });
    expect(cloudRefused.status).toBe(401);
    expect(cloudRefused.headers.get("www-authenticate")).toBe('ApiKey realm="Cumulo", header="apikey"');
  });

  it("keeps list links relative when the request target is in absolute form", async () => {
    const answer = await sendRaw(
      t.baseUrl,
      `GET http://evil.example/v1/media/libraries?limit=1 HTTP/1.1\r\nHost: ${new URL(t.baseUrl).host}\r\nAuthorization: Bearer ${t.adminKey}\r\nConnection: close\r\n\r\n`,
    );
    expect(answer?.status).toBe(200);
    expect(JSON.parse(answer?.body ?? "{}").meta.links.self).toBe("/v1/media/libraries?limit=1&page=1");
  });

  it("echoes a given X-Request-Id and generates one otherwise", async () => {
    const echoed = await t.request("GET", "/healthz", { headers: { "x-request-id": "trace-123" } });
    expect(echoed.headers.get("x-request-id")).toBe("trace-123");
    const generated = await t.request("GET", "/healthz");
    expect(generated.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const unsafe = await t.request("GET", "/healthz", { headers: { "x-request-id": "bad id with spaces" } });
    expect(unsafe.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const traceLike = "00-4bf92f3577b34da6a3ce929d0e0e4736/00f067aa0ba902b7+01==";
    const trace = await t.request("GET", "/healthz", { headers: { "x-request-id": traceLike } });
    expect(trace.headers.get("x-request-id")).toBe(traceLike);
    const error = await t.request("GET", "/v1/media/libraries/not-a-uuid", {
      headers: { "x-request-id": "on-error-1" },
    });
    expect(error.status).toBe(404);
    expect(error.headers.get("x-request-id")).toBe("on-error-1");
  });

  it("answers a plain-text body with 415 in every group", async () => {
    const headers = { "content-type": "text/plain" };
    const cdn = await t.request("POST", "/v1/cdn/distributions", { headers, body: "{}" });
    expect(cdn.status).toBe(415);
    expect(cdn.body).toEqual({ success: false, message: "Unsupported Media Type" });
    const media = await t.request("POST", "/v1/media/libraries", { headers, body: "{}" });
    expect(media.status).toBe(415);
    const cloud = await t.cloud("POST", "/v1/user-resource/token", { headers, body: "x" });
    expect(cloud.status).toBe(415);
    expect(cloud.body).toEqual({
      message: "Unsupported Media Type",
      errors: { Error: "Unsupported Media Type" },
    });
  });

  it("reads a request without a body as {} and refuses a body that is not an object", async () => {
    const none = await t.request("POST", "/v1/cdn/distributions");
    expect(none.status).toBe(400);
    expect(none.body.errors.map((e: { field: string; code: string }) => [e.field, e.code])).toEqual(
      expect.arrayContaining([
        ["hostname", "validation_required"],
        ["origin_url", "validation_required"],
      ]),
    );
    for (const body of ["[]", "null", '"text"', "42"]) {
      const wrong = await t.request("POST", "/v1/media/libraries", {
        headers: { "content-type": "application/json" },
        body,
      });
      expect(wrong.status, body).toBe(400);
      expect(wrong.body, body).toEqual({ success: false, message: "Invalid Request" });
    }
    const malformed = await t.request("POST", "/v1/media/libraries", {
      headers: { "content-type": "application/json" },
      body: "{bad",
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ success: false, message: "Invalid Request" });
  });

  it("finds a resource by its id in upper case too, on either store", async () => {
    const library = await t.request("POST", "/v1/media/libraries", { json: { name: "case" } });
    const id = library.body.data.id as string;
    const got = await t.request("GET", `/v1/media/libraries/${id.toUpperCase()}`);
    expect(got.status).toBe(200);
    expect(got.body.data.id).toBe(id);
    const vm = await t.cloud("POST", "/v1/user-resource/vm", { form: { name: "case" } });
    const found = await t.cloud("GET", `/v1/user-resource/vm?uuid=${String(vm.body.uuid).toUpperCase()}`);
    expect(found.status).toBe(200);
    expect(found.body.uuid).toBe(vm.body.uuid);
  });

  it("names what a POST created in Location, where a GET finds it", async () => {
    const created = async (path: string, json: Record<string, unknown>) => {
      const answer = await t.request("POST", `${path}?ignored=1`, { json });
      expect(answer.status, path).toBe(201);
      const id = answer.body.data.id as string;
      const location = answer.headers.get("location");
      expect(location, path).toBe(`${path}/${id}`);
      const got = await t.request("GET", location as string);
      expect(got.status, path).toBe(200);
      expect(got.body.data.id, path).toBe(id);
      return id;
    };
    const libraries = "/v1/media/libraries";
    const library = await created(libraries, { name: "located" });
    await created(`${libraries}/${library}/folders`, { name: "folder" });
    await created(`${libraries}/${library}/videos`, { title: "video" });
    await created(`${libraries}/${library}/players`, { name: "player" });
    await created(`${libraries}/${library}/webhooks`, {
      name: "hook",
      url: "https://hooks.example.com/in",
      events: ["ready"],
    });
    await created("/v1/cdn/distributions", {
      hostname: "located.example.com",
      origin_url: "https://origin.example.com",
    });
    const { paths } = (await t.request("GET", "/openapi.json", { anonymous: true })).body;
    expect(paths["/v1/media/libraries"].post.responses["201"].headers.location.schema.type).toBe("string");
  });

  it("names a resource in links and Location with its id in lower case, however the request spelled it", async () => {
    const library = (await t.request("POST", "/v1/media/libraries", { json: { name: "spelled" } })).body.data
      .id as string;
    // Upper case, a percent-encoded digit and a trailing slash all reach the same route.
    const spelled = `/v1/media/libraries/%${library.charCodeAt(0).toString(16)}${library.slice(1).toUpperCase()}`;
    const folder = await t.request("POST", `${spelled}/folders/`, { json: { name: "f" } });
    expect(folder.status).toBe(201);
    expect(folder.headers.get("location")).toBe(
      `/v1/media/libraries/${library}/folders/${folder.body.data.id}`,
    );
    const list = await t.request("GET", `${spelled}/folders/?limit=5`);
    expect(list.status).toBe(200);
    expect(list.body.meta.links).toEqual({
      self: `/v1/media/libraries/${library}/folders?limit=5&page=1`,
      first: `/v1/media/libraries/${library}/folders?limit=5&page=1`,
      last: `/v1/media/libraries/${library}/folders?limit=5&page=1`,
    });
  });

  it("answers unknown media routes with the media 404 body and unknown cloud routes with the gateway body", async () => {
    const media = await t.request("GET", "/v1/media/nothing-here");
    expect(media.status).toBe(404);
    expect(media.body).toEqual({ success: false, message: "Resource not found" });
    const cloud = await t.cloud("GET", "/v1/network/nothing-here");
    expect(cloud.status).toBe(404);
    expect(cloud.body).toEqual({ message: "no route and no API found with those values" });
    for (const path of ["/v1/cloud/nothing-here", "/v1/cloud", "/v1/cloud/local-1/nothing"]) {
      const prefixed = await t.cloud("GET", path);
      expect(prefixed.status, path).toBe(404);
      expect(prefixed.body, path).toEqual({ message: "no route and no API found with those values" });
    }
    // Before its body is read: a malformed one was 400 (QA of 4 December, session 41).
    const broken = { headers: { "content-type": "application/json" }, body: "{not json" };
    const mediaPost = await t.request("POST", "/v1/media/nothing-here", broken);
    expect([mediaPost.status, mediaPost.body]).toEqual([
      404,
      { success: false, message: "Resource not found" },
    ]);
    const cloudPost = await t.cloud("POST", "/v1/network/nothing-here", broken);
    expect([cloudPost.status, cloudPost.body]).toEqual([
      404,
      { message: "no route and no API found with those values" },
    ]);
  });

  it("serves a valid OpenAPI 3.1 document and a reference page", async () => {
    const doc = await t.request("GET", "/openapi.json", { anonymous: true });
    expect(doc.status).toBe(200);
    expect(doc.body.openapi).toBe("3.1.0");
    expect(doc.body.paths["/v1/livestream/health"]).toBeDefined();
    // `/docs` answers the page itself (no redirect); its script loads from an absolute path.
    const page = await fetch(`${t.baseUrl}/docs`, { redirect: "manual" });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    const script = /<script src="([^"]+)"/.exec(await page.text())?.[1] ?? "";
    expect(script.startsWith("/")).toBe(true);
    expect((await t.request("GET", script, { anonymous: true })).status).toBe(200);
    // Last: validating takes seconds of this process's CPU, in which the server (in this process
    // too) cannot run its keep-alive timer; a request sent right after could meet a closing socket.
    const result = await validate(structuredClone(doc.body));
    expect(result.valid, JSON.stringify(result)).toBe(true);
  });

  it("documents what a caller may leave out, the media types answered and every way to authenticate", async () => {
    const dev = await startTestApp({ CUMULO_DEV_MODE: "true" });
    try {
      const { paths } = (await dev.request("GET", "/openapi.json", { anonymous: true })).body;
      // Fields with a default are filled in by validation: optional to the caller.
      const listLibraries = paths["/v1/media/libraries"].get;
      const limit = listLibraries.parameters.find(
        (parameter: { name: string }) => parameter.name === "limit",
      );
      expect(limit.required).toBe(false);
      const security =
        paths["/v1/media/libraries/{libraryId}/security"].put.requestBody.content["application/json"];
      expect(security.schema.properties.referrers.required).toEqual(["action", "values"]);
      // The console's session cookie is accepted wherever a key is; developer mode wants a key.
      expect(listLibraries.security).toContainEqual({ consoleSession: [] });
      expect(paths["/_cumulo/time"].get.security).toEqual([{ bearer: [] }, { apiKeyHeader: [] }]);
      // Answers that are not JSON say so.
      expect(Object.keys(paths["/embed/{libraryId}/{videoId}"].get.responses["200"].content)).toEqual([
        "text/html",
      ]);
      const upload = paths["/v1/media/tus/{uploadId}"];
      expect(upload.head.operationId).toBe("getResumableUploadOffset");
      expect(Object.keys(upload.patch.responses["409"].content).sort()).toEqual([
        "application/json",
        "text/plain",
      ]);
      expect(upload.patch.responses["412"]).toBeDefined();
    } finally {
      await dev.close();
    }
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

  // Several nodes started at once on an empty shared store (SQLite stores have one server).
  it.runIf(testStoreKind() === "postgres")(
    "makes one default organization when several nodes start together on an empty store",
    { timeout: 60_000 },
    async () => {
      for (const bootstrapKey of ["together_bootstrap_key_0123456789", ""]) {
        const store = await createTestStore();
        try {
          // Each node checked, found nothing and made its own: all but one stopped on the key's
          // unique index, or (without a key) each made a Default organization of its own.
          const nodes = await Promise.all(
            [1, 2, 3].map(() => startTestApp({ CUMULO_BOOTSTRAP_API_KEY: bootstrapKey }, { store })),
          );
          try {
            const organizations = await nodes[0]?.cumulo.services.identity.listOrganizations();
            expect(
              organizations?.map((org) => org.name),
              bootstrapKey,
            ).toEqual(["Default"]);
            const generated = nodes.map((node) => node.cumulo.generatedKey).filter(Boolean);
            expect(generated).toHaveLength(bootstrapKey ? 0 : 1);
          } finally {
            await Promise.all(nodes.map((node) => node.close()));
          }
        } finally {
          await store.drop();
        }
      }
    },
  );
});
