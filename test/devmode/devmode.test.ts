import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";
import { sha256, storedSource, TUS_PATH } from "../uploads/support.ts";

const DEV_ON = { CUMULO_DEV_MODE: "true" };

/** tus by hand with the admin key: an upload created for a video, its PATCHes, and what HEAD says. */
function tusByHand(t: TestApp) {
  const headers = { authorization: `Bearer ${t.adminKey}`, "tus-resumable": "1.0.0" };
  return {
    async create(libraryId: string, videoId: string, length: number): Promise<string> {
      const created = await fetch(`${t.baseUrl}${TUS_PATH}`, {
        method: "POST",
        headers: {
          ...headers,
          "upload-length": String(length),
          "upload-metadata": `library_id ${btoa(libraryId)},video_id ${btoa(videoId)}`,
        },
      });
      expect(created.status).toBe(201);
      return (created.headers.get("location") ?? "").split("/").pop() ?? "";
    },
    patch: (id: string, offset: number, body: Uint8Array | ReadableStream<Uint8Array>) =>
      fetch(`${t.baseUrl}${TUS_PATH}/${id}`, {
        method: "PATCH",
        headers: {
          ...headers,
          "upload-offset": String(offset),
          "content-type": "application/offset+octet-stream",
        },
        body,
        duplex: "half",
      } as RequestInit),
    async offsetOf(id: string) {
      const head = await fetch(`${t.baseUrl}${TUS_PATH}/${id}`, { method: "HEAD", headers });
      return { status: head.status, offset: head.headers.get("upload-offset") };
    },
  };
}

describe("developer mode off (the default)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it("answers the ordinary 404 on every developer route and leaves them out of the document", async () => {
    for (const [method, path] of [
      ["GET", "/_cumulo"],
      ["POST", "/_cumulo/state/reset"],
      ["PUT", "/_cumulo/state/snapshots/one"],
      ["POST", "/_cumulo/state/snapshots/one/load"],
      ["GET", "/_cumulo/time"],
      ["POST", "/_cumulo/time"],
      ["POST", "/_cumulo/faults"],
      ["POST", "/_cumulo/state/seed"],
      ["GET", "/_cumulo/transitions"],
      ["PUT", "/_cumulo/transitions"],
      ["DELETE", "/_cumulo/transitions"],
    ] as const) {
      const response = await t.request(method, path, method === "GET" ? {} : { json: {} });
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(response.body).toEqual({ success: false, message: "Resource not found" });
    }
    const document = await t.request("GET", "/openapi.json", { anonymous: true });
    expect(Object.keys(document.body.paths).filter((path) => path.startsWith("/_cumulo"))).toEqual([]);
  });
});

describe("developer mode on", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(DEV_ON);
  });
  afterAll(() => t.close());

  it("lists its routes under the dev-mode tag", async () => {
    const document = await t.request("GET", "/openapi.json", { anonymous: true });
    const devPaths = Object.entries(document.body.paths as Record<string, Record<string, { tags: string[] }>>)
      .filter(([path]) => path.startsWith("/_cumulo"))
      .flatMap(([, operations]) => Object.values(operations));
    expect(devPaths.length).toBeGreaterThanOrEqual(8);
    for (const operation of devPaths) expect(operation.tags).toEqual(["dev-mode"]);
    // A seed is taken as JSON or YAML, and the document says so.
    const seed = document.body.paths["/_cumulo/state/seed"].post;
    expect(Object.keys(seed.requestBody.content).sort()).toEqual([
      "application/json",
      "application/x-yaml",
      "application/yaml",
      "text/x-yaml",
      "text/yaml",
    ]);
  });

  it("needs an admin key of the bootstrap organization", async () => {
    expect((await t.request("GET", "/_cumulo", { anonymous: true })).status).toBe(401);
    expect((await t.request("GET", "/_cumulo", { key: "not-a-key-at-all-0000000" })).status).toBe(401);
    // The operator's key in the cloud API's header: the answer says which headers are read.
    const cloudHeader = await t.cloud("GET", "/_cumulo");
    expect(cloudHeader.status).toBe(401);
    expect(cloudHeader.body).toEqual({
      success: false,
      error: "unauthorized",
      code: "auth_type_not_found",
      message:
        "Could not determine the authentication type: provide a valid Authorization or X-API-Key header.",
    });
    const other = await t.createOrganization();
    const refused = await t.request("GET", "/_cumulo", { key: other.key });
    expect(refused.status).toBe(403);
    expect(refused.body.success).toBe(false);
    const operator = await t.request("GET", "/_cumulo");
    expect(operator.status).toBe(200);
    expect(operator.body.offers).toEqual(expect.arrayContaining([expect.stringContaining("/_cumulo/time")]));
  });

  it("saves a snapshot, then loads it back after changes, and resets to the bootstrap state", async () => {
    const kept = await createLibrary(t, { name: "Kept" });
    const saved = await t.request("PUT", "/_cumulo/state/snapshots/base");
    expect(saved.status, saved.text).toBe(200);
    expect(saved.body.snapshot.name).toBe("base");
    const listed = await t.request("GET", "/_cumulo/state/snapshots");
    expect(listed.body.snapshots.map((s: { name: string }) => s.name)).toEqual(["base"]);

    const later = await createLibrary(t, { name: "Later" });
    await t.request("DELETE", `/v1/media/libraries/${kept.id}`);
    const loaded = await t.request("POST", "/_cumulo/state/snapshots/base/load");
    expect(loaded.status, loaded.text).toBe(200);
    expect((await t.request("GET", `/v1/media/libraries/${kept.id}`)).status).toBe(200);
    expect((await t.request("GET", `/v1/media/libraries/${later.id}`)).status).toBe(404);
    // Ids keep counting after the restored rows: a new organization and key work.
    const created = await t.createOrganization("After load");
    expect((await t.request("GET", "/v1/media/libraries", { key: created.key })).status).toBe(200);

    const reset = await t.request("POST", "/_cumulo/state/reset", { json: {} });
    expect(reset.status, reset.text).toBe(200);
    expect((await t.request("GET", `/v1/media/libraries/${kept.id}`)).status).toBe(404);
    // The other organization's key is gone, the bootstrap key works again at once.
    expect((await t.request("GET", "/v1/media/libraries", { key: created.key })).status).toBe(401);
    expect((await t.request("GET", "/v1/media/libraries")).body.data).toEqual([]);

    expect((await t.request("POST", "/_cumulo/state/snapshots/base/load")).status).toBe(200);
    expect((await t.request("GET", `/v1/media/libraries/${kept.id}`)).status).toBe(200);
  });

  it("keeps the default organization's id, billing account and key through a whole reset to bootstrap", async () => {
    const { identity } = t.cumulo.services;
    const [before] = await identity.listOrganizations();
    const billing = await identity.listBillingAccounts(before.id);
    const second = await identity.createApiKey(before.id, { name: "second", readOnly: false });
    if (second.outcome !== "created") throw new Error(second.outcome);
    const other = await t.createOrganization();
    // A recording tied to the organization's id goes on recording after the reset.
    const recording = await t.request("POST", "/_cumulo/recording", {
      json: { organization_id: before.id, recording: true },
    });
    expect(recording.status, recording.text).toBe(200);

    const reset = await t.request("POST", "/_cumulo/state/reset", { json: { to: "bootstrap" } });
    expect(reset.status, reset.text).toBe(200);
    expect(reset.body.generated_key).toBeUndefined();

    expect(await identity.listOrganizations()).toEqual([before]);
    expect(await identity.listBillingAccounts(before.id)).toEqual(billing);
    expect((await t.request("GET", "/v1/media/libraries")).status).toBe(200);
    // The keys made since, and the other organization's, are gone as before.
    expect((await t.request("GET", "/v1/media/libraries", { key: second.api_key })).status).toBe(401);
    expect((await t.request("GET", "/v1/media/libraries", { key: other.key })).status).toBe(401);
    const [recorded] = (await t.request("GET", "/_cumulo/recording")).body.recordings;
    expect(recorded).toMatchObject({ organization_id: before.id, recording: true });
    expect(recorded.entries).toBeGreaterThan(0);
    await t.request("POST", "/_cumulo/recording", { json: { organization_id: before.id, recording: false } });
    // Ids go on after the rows kept: a new organization and key work.
    const after = await t.createOrganization("After reset");
    expect((await t.request("GET", "/v1/media/libraries", { key: after.key })).status).toBe(200);
  });

  it("saves, seeds and loads one at a time: the same name saved at once, seeds at once", async () => {
    const saves = await Promise.all(
      Array.from({ length: 6 }, () => t.request("PUT", "/_cumulo/state/snapshots/race")),
    );
    expect(saves.map((response) => response.status)).toEqual([200, 200, 200, 200, 200, 200]);
    // A snapshot of the name the seeds used for their rollback is left alone by them.
    expect((await t.request("PUT", "/_cumulo/state/snapshots/seed_rollback")).status).toBe(200);
    const seeds = await Promise.all(
      [1, 2, 3, 4].map((n) =>
        t.request("POST", "/_cumulo/state/seed", { json: { organizations: [{ name: `Seeded ${n}` }] } }),
      ),
    );
    expect(seeds.map((response) => response.status)).toEqual([200, 200, 200, 200]);
    const names = (await t.request("GET", "/_cumulo/state/snapshots")).body.snapshots.map(
      (snapshot: { name: string }) => snapshot.name,
    );
    expect(names).toEqual(expect.arrayContaining(["race", "seed_rollback"]));
    expect((await t.request("POST", "/_cumulo/state/snapshots/race/load")).status).toBe(200);
    await t.request("DELETE", "/_cumulo/state/snapshots/race");
    await t.request("DELETE", "/_cumulo/state/snapshots/seed_rollback");
  });

  it("keeps unfinished resumable uploads in a snapshot: one resumes after a load, and a reset removes their bytes", async () => {
    const library = await createLibrary(t, { name: "Uploads" });
    const video = await createVideo(t, library.id);
    const bytes = randomBytes(96 * 1024);
    const { create: createUpload, patch, offsetOf } = tusByHand(t);
    const create = () => createUpload(library.id, video.id, bytes.length);
    const uploads = join(t.store.dataDir, "uploads");
    const half = bytes.length / 2;

    const saved = await create();
    expect((await patch(saved, 0, bytes.subarray(0, half))).status).toBe(204);
    expect((await t.request("PUT", "/_cumulo/state/snapshots/uploads")).status).toBe(200);
    // Since the save: more bytes of the saved upload, and an upload the snapshot does not hold.
    expect((await patch(saved, half, bytes.subarray(half, half + 1024))).status).toBe(204);
    const later = await create();

    expect((await t.request("POST", "/_cumulo/state/snapshots/uploads/load")).status).toBe(200);
    // The upload as saved: before, a load left the uploads folder as it found it (here 1 KiB past the
    // snapshot's offset; after a reset, or in another data dir, no file at all: 410).
    expect(await offsetOf(saved)).toEqual({ status: 200, offset: String(half) });
    expect((await offsetOf(later)).status).toBe(404);
    expect(readdirSync(uploads)).toEqual([saved]);
    expect((await patch(saved, half, bytes.subarray(half))).status).toBe(204);
    expect(sha256(await storedSource(t, video.id))).toBe(sha256(bytes));

    expect((await t.request("POST", "/_cumulo/state/snapshots/uploads/load")).status).toBe(200);
    expect(readdirSync(uploads)).toEqual([saved]);
    expect((await t.request("POST", "/_cumulo/state/reset", { json: {} })).status).toBe(200);
    expect(existsSync(uploads) ? readdirSync(uploads) : []).toEqual([]);
    await t.request("DELETE", "/_cumulo/state/snapshots/uploads");
  });

  it("does not answer an upload complete whose file a load replaced while its PATCH ran", async () => {
    const library = await createLibrary(t, { name: "Uploads under a load" });
    const video = await createVideo(t, library.id);
    const bytes = randomBytes(128 * 1024);
    const tus = tusByHand(t);
    const id = await tus.create(library.id, video.id, bytes.length);
    const quarter = bytes.length / 4;
    const patch = (offset: number, body: Uint8Array | ReadableStream<Uint8Array>) =>
      tus.patch(id, offset, body);
    expect((await patch(0, bytes.subarray(0, quarter))).status).toBe(204);
    expect((await t.request("PUT", "/_cumulo/state/snapshots/mid_patch")).status).toBe(200);

    // The rest in one PATCH whose body stops halfway until the snapshot is loaded.
    let sendRest: () => void = () => {};
    const rest = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(bytes.subarray(quarter, 2 * quarter));
        await new Promise<void>((resolve) => {
          sendRest = resolve;
        });
        controller.enqueue(bytes.subarray(2 * quarter));
        controller.close();
      },
    });
    const answer = patch(quarter, rest);
    const file = join(t.store.dataDir, "uploads", id);
    await waitUntil(() => statSync(file).size === 2 * quarter, 10_000, "half the upload written");
    expect((await t.request("POST", "/_cumulo/state/snapshots/mid_patch/load")).status).toBe(200);
    sendRest();
    // Before, 204 with the whole length as offset, and the snapshot's quarter became the source.
    expect((await answer).status).toBe(409);
    expect(await tus.offsetOf(id)).toEqual({ status: 200, offset: String(quarter) });
    expect((await patch(quarter, bytes.subarray(quarter))).status).toBe(204);
    expect(sha256(await storedSource(t, video.id))).toBe(sha256(bytes));
    await t.request("DELETE", "/_cumulo/state/snapshots/mid_patch");
  });

  it("does not take a snapshot folder without its store for a snapshot", async () => {
    if (t.store.kind !== "sqlite") return;
    mkdirSync(join(t.cumulo.config.dataDir, "snapshots", "ghost"), { recursive: true });
    const names = (await t.request("GET", "/_cumulo/state/snapshots")).body.snapshots.map(
      (snapshot: { name: string }) => snapshot.name,
    );
    expect(names).not.toContain("ghost");
    expect((await t.request("POST", "/_cumulo/state/snapshots/ghost/load")).status).toBe(404);
  });

  it("answers 404 for an unknown snapshot and for a name that cannot be one", async () => {
    expect((await t.request("POST", "/_cumulo/state/snapshots/missing/load")).status).toBe(404);
    expect((await t.request("DELETE", "/_cumulo/state/snapshots/missing")).status).toBe(404);
    expect((await t.request("POST", "/_cumulo/state/snapshots/Bad-Name/load")).status).toBe(404);
  });

  it("refuses to save under a name that cannot be one, naming the field", async () => {
    const saved = await t.request("PUT", "/_cumulo/state/snapshots/Bad-Name");
    expect(saved.status).toBe(400);
    expect(saved.body.errors).toEqual([
      expect.objectContaining({ field: "name", code: "validation_format" }),
    ]);
  });

  it("moves the clock forward and back to real time", async () => {
    const before = await t.request("GET", "/_cumulo/time");
    expect(before.body.offset_ms).toBe(0);
    const moved = await t.request("POST", "/_cumulo/time", { json: { advance_ms: 86_400_000 } });
    expect(moved.status).toBe(200);
    expect(moved.body.offset_ms).toBe(86_400_000);
    expect(Date.parse(moved.body.now) - Date.parse(before.body.now)).toBeGreaterThanOrEqual(86_400_000);
    // Writes are stamped with the moved clock.
    const library = await createLibrary(t, { name: "Tomorrow" });
    expect(Date.parse(String(library.created_at))).toBeGreaterThanOrEqual(Date.parse(moved.body.now));
    const real = await t.request("POST", "/_cumulo/time", { json: { real: true } });
    expect(real.body.offset_ms).toBe(0);
    // `real: false` asks for nothing: refused rather than answered as if the clock had moved.
    const notReal = await t.request("POST", "/_cumulo/time", { json: { real: false } });
    expect([notReal.status, notReal.body.errors]).toEqual([
      400,
      [expect.objectContaining({ field: "real", code: "validation_enum" })],
    ]);
    const both = await t.request("POST", "/_cumulo/time", { json: { real: true, advance_ms: 5 } });
    expect(both.status).toBe(400);
    // None of the three: each is reported missing, as the contract asks.
    const none = await t.request("POST", "/_cumulo/time", { json: {} });
    expect(
      none.body.errors.map((error: { field: string; code: string }) => `${error.field}:${error.code}`),
    ).toEqual(["advance_ms:validation_required", "to:validation_required", "real:validation_required"]);
  });

  it("refuses to move the clock past its last instant (a year short of the year 10000), and keeps it as it was", async () => {
    for (const advance of [1e300, Number.MAX_SAFE_INTEGER, 8_640_000_000_000_000]) {
      const refused = await t.request("POST", "/_cumulo/time", { json: { advance_ms: advance } });
      expect(refused.status, String(advance)).toBe(400);
      expect(refused.body.errors).toEqual([
        expect.objectContaining({ field: "advance_ms", code: "validation_max" }),
      ]);
    }
    // Each step is allowed; their sum is not.
    const nearEnd = Date.parse("9998-12-31T00:00:00.000Z") - Date.now();
    expect((await t.request("POST", "/_cumulo/time", { json: { advance_ms: nearEnd } })).status).toBe(200);
    expect((await t.request("POST", "/_cumulo/time", { json: { advance_ms: nearEnd } })).status).toBe(400);
    const time = await t.request("GET", "/_cumulo/time");
    expect(time.status).toBe(200);
    expect(time.body.now).toMatch(/^9998-12-31T/);
    expect((await t.request("POST", "/v1/media/libraries", { json: { name: "Late" } })).status).toBe(201);

    // Moved to its last instant, the clock stays there while real time goes on.
    const last = await t.request("POST", "/_cumulo/time", { json: { to: "9998-12-31T23:59:59.999Z" } });
    expect([last.status, last.body.now]).toEqual([200, "9998-12-31T23:59:59.999Z"]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const stamped = await t.request("POST", "/v1/media/libraries", { json: { name: "Last" } });
    expect(stamped.body.data.created_at).toBe("9998-12-31T23:59:59.999Z");
    expect((await t.request("GET", "/_cumulo/time")).body.now).toBe("9998-12-31T23:59:59.999Z");
    // Staying there is no move past it.
    const still = await t.request("POST", "/_cumulo/time", { json: { advance_ms: 0 } });
    expect([still.status, still.body.now]).toEqual([200, "9998-12-31T23:59:59.999Z"]);
    expect((await t.request("POST", "/_cumulo/time", { json: { real: true } })).body.offset_ms).toBe(0);
  });

  it("injects a fault with the group's error body, marks it, and stops after its count", async () => {
    // The read's answer is kept (src/http/response-cache.ts): a fault applies to kept answers too.
    for (let i = 0; i < 2; i++) expect((await t.request("GET", "/v1/media/libraries")).status).toBe(200);
    const added = await t.request("POST", "/_cumulo/faults", {
      json: { route: "/v1/media/libraries", method: "GET", status: 503, count: 1 },
    });
    expect(added.status, added.text).toBe(201);
    const faulted = await t.request("GET", "/v1/media/libraries");
    expect(faulted.status).toBe(503);
    expect(faulted.headers.get("x-cumulo-fault")).toBe(added.body.id);
    expect(faulted.body).toEqual({ success: false, message: expect.stringContaining(added.body.id) });
    const next = await t.request("GET", "/v1/media/libraries");
    expect(next.status).toBe(200);
    expect(next.headers.get("x-cumulo-fault")).toBeNull();
    expect((await t.request("GET", "/_cumulo/faults")).body.faults).toEqual([]);

    const cloud = await t.request("POST", "/_cumulo/faults", {
      json: { path_prefix: "/v1/cloud", status: 500 },
    });
    const cloudAnswer = await t.cloud("GET", "/v1/cloud/user-resource/vm/list");
    expect(cloudAnswer.status).toBe(500);
    expect(cloudAnswer.headers.get("x-cumulo-fault")).toBe(cloud.body.id);
    expect(cloudAnswer.body.message).toEqual(expect.stringContaining(cloud.body.id));
    expect((await t.request("DELETE", `/_cumulo/faults/${cloud.body.id}`)).status).toBe(204);
    expect((await t.request("DELETE", `/_cumulo/faults/${cloud.body.id}`)).status).toBe(404);
    expect((await t.request("POST", "/_cumulo/faults", { json: { route: "/x" } })).status).toBe(400);
  });

  it("takes a rule's route as registered or as /openapi.json names it, and refuses one no route has", async () => {
    const library = (await t.request("POST", "/v1/media/libraries", { json: { name: "Routed" } })).body.data;
    const videos = `/v1/media/libraries/${library.id}/videos`;
    for (const route of [
      "/v1/media/libraries/:libraryId/videos",
      "/v1/media/libraries/{libraryId}/videos",
      "/v1/media/libraries/:id/videos/",
    ]) {
      const added = await t.request("POST", "/_cumulo/faults", {
        json: { route, method: "GET", status: 502, count: 1 },
      });
      expect(added.status, `${route}: ${added.text}`).toBe(201);
      expect(added.body.route).toBe(route);
      const faulted = await t.request("GET", videos);
      expect(faulted.status, route).toBe(502);
      expect(faulted.headers.get("x-cumulo-fault"), route).toBe(added.body.id);
    }
    // Location-specific cloud routes in the document's spelling.
    const located = await t.request("POST", "/_cumulo/faults", {
      json: { route: "/v1/{location}/storage/disks", status: 500, count: 1 },
    });
    expect(located.status, located.text).toBe(201);
    expect((await t.cloud("GET", "/v1/local-1/storage/disks")).status).toBe(500);
    // A rule that could never apply is most likely a typo: refused, as an unknown organization is.
    for (const json of [
      { route: "/v1/media/library", status: 500 },
      { route: "/v1/media/libraries/:libraryId/video", status: 500 },
      { route: "/v1/media/libraries/{libraryId}/videos", method: "PUT", status: 500 },
    ]) {
      const refused = await t.request("POST", "/_cumulo/faults", { json });
      expect(refused.status, json.route).toBe(400);
      expect(refused.body.errors, json.route).toEqual([
        { field: "route", code: "validation_format", message: expect.stringContaining("/openapi.json") },
      ]);
    }
    expect((await t.request("GET", "/_cumulo/faults")).body.faults).toEqual([]);
    expect((await t.request("GET", videos)).status).toBe(200);
  });

  it("answers an injected failure with the body the route itself answers it with, where it has its own", async () => {
    const health = await t.request("POST", "/_cumulo/faults", {
      json: { route: "/v1/livestream/health", status: 503, count: 1 },
    });
    const down = await t.request("GET", "/v1/livestream/health");
    expect(down.status).toBe(503);
    expect(down.body).toEqual({ status: "unhealthy" });
    expect(down.headers.get("x-cumulo-fault")).toBe(health.body.id);
    // Another status is the group's error body, as the route would answer it.
    await t.request("POST", "/_cumulo/faults", {
      json: { route: "/v1/livestream/health", status: 500, count: 1 },
    });
    const broken = await t.request("GET", "/v1/livestream/health");
    expect(broken.status).toBe(500);
    expect(broken.body).toEqual({ success: false, message: expect.stringContaining("Fault injected") });

    const library = (await t.request("POST", "/v1/media/libraries", { json: { name: "Migrating" } })).body
      .data;
    const provider = await t.request("POST", "/_cumulo/faults", {
      json: { route: "/v1/media/libraries/{libraryId}/migration-jobs/validate", status: 502, count: 1 },
    });
    const unreachable = await t.request("POST", `/v1/media/libraries/${library.id}/migration-jobs/validate`, {
      json: { provider: "vimeo", credentials: { access_token: "token" } },
    });
    expect(unreachable.status).toBe(502);
    expect(unreachable.body).toEqual({});
    expect(unreachable.headers.get("x-cumulo-fault")).toBe(provider.body.id);
  });

  it("injects faults only for the organization named", async () => {
    const other = await t.createOrganization("Faulted");
    await t.request("POST", "/_cumulo/faults", {
      json: { organization_id: other.organizationId, status: 500 },
    });
    expect((await t.request("GET", "/v1/media/libraries", { key: other.key })).status).toBe(500);
    expect((await t.request("GET", "/v1/media/libraries")).status).toBe(200);
    expect((await t.request("DELETE", "/_cumulo/faults")).status).toBe(204);
    expect((await t.request("GET", "/v1/media/libraries", { key: other.key })).status).toBe(200);
  });

  it("leaves health checks, metrics and the console alone under a rule that matches everything", async () => {
    const everything = await t.request("POST", "/_cumulo/faults", { json: { status: 503 } });
    expect(everything.status).toBe(201);
    for (const path of ["/healthz", "/readyz", "/openapi.json", "/console/"]) {
      const answer = await t.request("GET", path, { anonymous: true });
      expect(answer.status, path).toBeLessThan(500);
      expect(answer.headers.get("x-cumulo-fault"), path).toBeNull();
    }
    expect((await t.request("GET", "/v1/media/libraries")).status).toBe(503);
    expect((await t.request("GET", "/_cumulo/faults")).body.faults[0].hits).toBe(1);
    // A seed is a developer-mode call: the calls it makes through the API are not hit either.
    const seeded = await t.request("POST", "/_cumulo/state/seed", {
      json: {
        organizations: [
          { name: "Seeded under a fault", libraries: [{ name: "Made" }], cloud: { disks: [{ size_gb: 1 }] } },
        ],
      },
    });
    expect(seeded.status, seeded.text).toBe(200);
    expect((await t.request("GET", "/_cumulo/faults")).body.faults[0].hits).toBe(1);
    const key = seeded.body.organizations[0].api_key;
    expect((await t.request("GET", "/v1/media/libraries", { key })).status).toBe(503);
    expect((await t.request("DELETE", "/_cumulo/faults")).status).toBe(204);
    const made = await t.request("GET", "/v1/media/libraries", { key });
    expect(made.body.data.map((library: { name: string }) => library.name)).toEqual(["Made"]);
  });
});

describe("developer mode without a bootstrap key", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ ...DEV_ON, CUMULO_BOOTSTRAP_API_KEY: "" });
  });
  afterAll(() => t.close());

  it("keeps the key printed at first start through a whole reset", async () => {
    const printed = t.cumulo.generatedKey ?? "";
    expect(printed).not.toBe("");
    const { identity } = t.cumulo.services;
    const [organization] = await identity.listOrganizations();
    const reset = await t.request("POST", "/_cumulo/state/reset", { key: printed, json: {} });
    expect(reset.status, reset.text).toBe(200);
    expect(reset.body.generated_key).toBeUndefined();
    expect((await t.request("GET", "/_cumulo", { key: printed })).status).toBe(200);
    expect(await identity.listOrganizations()).toEqual([organization]);
  });
});

describe("developer mode under a small request budget", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ ...DEV_ON, CUMULO_RATE_LIMIT: "3/60s", CUMULO_SIGN_IN_RATE_LIMIT: "2/60s" });
  });
  afterAll(() => t.close());

  it("does not count a harness's calls against any budget", async () => {
    // A test suite loads a snapshot before each test; the API calls under test keep their budget.
    expect((await t.request("PUT", "/_cumulo/state/snapshots/base")).status).toBe(200);
    for (let round = 0; round < 5; round++) {
      const loaded = await t.request("POST", "/_cumulo/state/snapshots/base/load");
      expect(loaded.status, loaded.text).toBe(200);
      expect(loaded.headers.get("ratelimit-remaining")).toBeNull();
    }
    const api = await t.request("GET", "/v1/media/libraries");
    expect(api.status).toBe(200);
    expect(api.headers.get("ratelimit-remaining")).toBe("2");
  });

  it("throttles wrong keys per client address, and never the operator's calls", async () => {
    for (let attempt = 0; attempt < 2; attempt++) {
      const wrong = await t.request("GET", "/_cumulo", { key: "not-the-operator-key-000000" });
      expect(wrong.status).toBe(401);
    }
    const refused = await t.request("POST", "/_cumulo/state/reset", { key: "not-the-operator-key-000000" });
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ success: false, error: "rate_limited", message: "Too many requests" });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await t.request("GET", "/_cumulo", { anonymous: true })).status).toBe(429);
    // The operator, from the same address, goes on as before: its calls are neither counted nor refused.
    for (let round = 0; round < 3; round++) expect((await t.request("GET", "/_cumulo")).status).toBe(200);
  });
});
