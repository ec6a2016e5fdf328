import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { HarEntry } from "../../src/devmode/recording.ts";
import { createLibrary } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { webhooksPath } from "../webhooks/helpers.ts";

describe("recording an organization's requests", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_DEV_MODE: "true" });
  });
  afterAll(() => t.close());

  it("records a workflow while on, masks every credential, and downloads it as HAR 1.2", async () => {
    const org = await t.createOrganization("Recorded");
    const other = await t.createOrganization("Not recorded");
    const on = await t.request("POST", "/_cumulo/recording", {
      json: { organization_id: org.organizationId, recording: true, body_limit_bytes: 4096 },
    });
    expect(on.status, on.text).toBe(200);
    expect(on.body).toEqual({ organization_id: org.organizationId, recording: true, entries: 0 });

    const library = await createLibrary(t, { name: "Recorded library" }, org.key);
    const hook = await t.request("POST", webhooksPath(library.id), {
      key: org.key,
      json: {
        name: "Hook",
        url: "https://hooks.example.com/in",
        events: ["created"],
        headers: { Authorization: "Bearer receiver-credential" },
      },
    });
    expect(hook.status, hook.text).toBe(201);
    const secret: string = hook.body.data.secret;
    const missing = await t.request("GET", "/v1/media/libraries/00000000-0000-4000-8000-000000000000", {
      anonymous: true,
      headers: { "x-api-key": org.key },
    });
    expect(missing.status).toBe(404);
    // A path segment that does not decode, recorded as sent (not as routed, `%25zz`).
    expect((await t.request("GET", "/v1/media/libraries/%zz", { key: org.key })).status).toBe(404);
    await createLibrary(t, { name: "Elsewhere" }, other.key);
    await t.request("POST", "/_cumulo/recording", {
      json: { organization_id: org.organizationId, recording: false },
    });
    await createLibrary(t, { name: "After stop" }, org.key);

    const har = await t.request("GET", `/_cumulo/recording.har?organization_id=${org.organizationId}`);
    expect(har.status, har.text).toBe(200);
    expect(har.body.log.version).toBe("1.2");
    const entries: HarEntry[] = har.body.log.entries;
    // The address the client called, host and port included.
    expect(new URL(entries[0]?.request.url ?? "").origin).toBe(new URL(t.baseUrl).origin);
    expect(
      entries.map((e) => [e.request.method, new URL(e.request.url).pathname, e.response.status]),
    ).toEqual([
      ["POST", "/v1/media/libraries", 201],
      ["POST", webhooksPath(library.id), 201],
      ["GET", "/v1/media/libraries/00000000-0000-4000-8000-000000000000", missing.status],
      ["GET", "/v1/media/libraries/%zz", 404],
    ]);
    expect(JSON.parse(entries[0]?.request.postData?.text ?? "{}")).toMatchObject({
      name: "Recorded library",
    });
    expect(JSON.parse(entries[0]?.response.content.text ?? "{}").data.id).toBe(library.id);
    const authorization = entries[0]?.request.headers.find((h) => h.name === "authorization");
    expect(authorization?.value).toBe("***");
    expect(entries[2]?.request.headers.find((h) => h.name === "x-api-key")?.value).toBe("***");
    for (const entry of entries) expect(entry.time).toBeGreaterThanOrEqual(0);
    // No credential anywhere: not the key, not the webhook secret.
    expect(har.text).not.toContain(org.key);
    expect(har.text).not.toContain(secret);
    expect(har.text).not.toContain("receiver-credential");
    expect(har.text).not.toContain("Elsewhere");

    const listed = await t.request("GET", "/_cumulo/recording");
    expect(listed.body.recordings).toEqual([
      { organization_id: org.organizationId, recording: false, entries: 4 },
    ]);
    expect(
      (await t.request("DELETE", `/_cumulo/recording?organization_id=${org.organizationId}`)).status,
    ).toBe(204);
    const empty = await t.request("GET", `/_cumulo/recording.har?organization_id=${org.organizationId}`);
    expect(empty.body.log.entries).toEqual([]);
  });

  it("records resumable uploads, whose answers tus writes itself, without their bodies", async () => {
    const org = await t.createOrganization("Uploads recorded");
    const library = await createLibrary(t, { name: "Tus" }, org.key);
    const newVideo = async () => {
      const video = await t.request("POST", `/v1/media/libraries/${library.id}/videos`, {
        key: org.key,
        json: { title: "resumable" },
      });
      expect(video.status, video.text).toBe(201);
      return video;
    };
    const video = await newVideo();
    // A browser's upload: no key, only an upload authorization's headers, of another video.
    const browserVideo = (await newVideo()).body.data.id;
    const authorization = await t.request(
      "POST",
      `/v1/media/libraries/${library.id}/videos/${browserVideo}/upload-authorization`,
      { key: org.key, json: {} },
    );
    expect(authorization.status, authorization.text).toBe(201);
    expect(
      (
        await t.request("POST", "/_cumulo/recording", {
          json: { organization_id: org.organizationId, recording: true },
        })
      ).status,
    ).toBe(200);
    const tus = { "tus-resumable": "1.0.0", authorization: `Bearer ${org.key}` };
    const created = await fetch(`${t.baseUrl}/v1/media/tus`, {
      method: "POST",
      headers: {
        ...tus,
        "upload-length": "10",
        "upload-metadata": `library_id ${btoa(library.id)},video_id ${btoa(video.body.data.id)}`,
      },
    });
    expect(created.status).toBe(201);
    const uploadUrl = new URL(created.headers.get("location") ?? "", `${t.baseUrl}/v1/media/tus/`).href;
    const patched = await fetch(uploadUrl, {
      method: "PATCH",
      headers: { ...tus, "upload-offset": "0", "content-type": "application/offset+octet-stream" },
      body: "hello",
    });
    expect(patched.status).toBe(204);
    expect((await fetch(uploadUrl, { method: "HEAD", headers: tus })).status).toBe(200);
    const signed = await fetch(`${t.baseUrl}/v1/media/tus`, {
      method: "POST",
      headers: { "tus-resumable": "1.0.0", "upload-length": "10", ...authorization.body.data.headers },
    });
    expect(signed.status).toBe(201);

    const har = await t.request("GET", `/_cumulo/recording.har?organization_id=${org.organizationId}`);
    const entries: HarEntry[] = har.body.log.entries;
    // Before: none of the three was in the recording.
    expect(
      entries.map((e) => [e.request.method, new URL(e.request.url).pathname, e.response.status]),
    ).toEqual([
      ["POST", "/v1/media/tus", 201],
      ["PATCH", new URL(uploadUrl).pathname, 204],
      ["HEAD", new URL(uploadUrl).pathname, 200],
      ["POST", "/v1/media/tus", 201],
    ]);
    expect(entries[3]?.request.headers.find((h) => h.name === "authorizationsignature")?.value).toBe("***");
    expect(entries[0]?.response.headers.find((h) => h.name === "location")?.value).toBe(
      created.headers.get("location"),
    );
    expect(entries[1]?.request.postData).toBeUndefined();
    // Its size as sent (before, 0 for a body that was not recorded); none for the HEAD.
    expect(entries[1]?.request.bodySize).toBe(5);
    expect(entries[2]?.request.bodySize).toBe(0);
    expect(har.text).not.toContain(org.key);
  });

  it("describes the HAR file in /openapi.json, entry by entry, for the typed client", async () => {
    const document = (await t.request("GET", "/openapi.json")).body;
    const answer =
      document.paths["/_cumulo/recording.har"].get.responses["200"].content["application/json"].schema;
    const log = answer.properties.log;
    expect(log.required).toEqual(["version", "creator", "entries"]);
    const entry = log.properties.entries.items;
    expect(entry.required).toEqual(
      expect.arrayContaining(["startedDateTime", "time", "request", "response", "timings"]),
    );
    expect(entry.properties.request.properties.headers.items.required).toEqual(["name", "value"]);
    expect(entry.properties.response.properties.content.required).toEqual(["size", "mimeType", "text"]);
  });

  it("masks the credentials that URLs in bodies carry: a playback token", async () => {
    const org = await t.createOrganization("Tokens");
    const library = await createLibrary(t, { name: "Private" }, org.key);
    const video = await t.request("POST", `/v1/media/libraries/${library.id}/videos`, {
      key: org.key,
      json: { title: "Secret screening" },
    });
    await t.request("POST", "/_cumulo/recording", {
      json: { organization_id: org.organizationId, recording: true },
    });
    const token = await t.request(
      "POST",
      `/v1/media/libraries/${library.id}/videos/${video.body.data.id}/playback-token`,
      { key: org.key, json: {} },
    );
    expect(token.status, token.text).toBe(201);
    const har = await t.request("GET", `/_cumulo/recording.har?organization_id=${org.organizationId}`);
    expect(har.text).not.toContain(token.body.data.token);
    const recorded = JSON.parse(har.body.log.entries[0].response.content.text).data;
    expect(new URL(recorded.manifest_url).searchParams.get("token")).toBe("***");
    expect(new URL(recorded.manifest_url).searchParams.get("expires")).toBe(String(token.body.data.expires));
    expect(new URL(recorded.direct_play_url).pathname).toBe(
      new URL(token.body.data.direct_play_url).pathname,
    );
  });

  it("records request bodies as the client sent them, credentials masked, forms as forms", async () => {
    const org = await t.createOrganization("As sent");
    await t.request("POST", "/_cumulo/recording", {
      json: { organization_id: org.organizationId, recording: true },
    });
    // Fields left out stay out (validation fills in defaults after the request was sent).
    const json = '{ "name" : "Sent as is" }';
    const library = await t.request("POST", "/v1/media/libraries", {
      key: org.key,
      body: json,
      headers: { "content-type": "application/json" },
    });
    expect(library.status, library.text).toBe(201);
    const form = "name=web&password=hunter2-hunter2&vcpu=2";
    const vm = await t.cloud("POST", "/v1/user-resource/vm", {
      key: org.key,
      body: form,
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(vm.status, vm.text).toBe(200);
    const har = await t.request("GET", `/_cumulo/recording.har?organization_id=${org.organizationId}`);
    const [created, made] = har.body.log.entries as HarEntry[];
    expect(created?.request.postData).toEqual({ mimeType: "application/json", text: json });
    expect(created?.request.bodySize).toBe(Buffer.byteLength(json));
    expect(made?.request.postData).toEqual({
      mimeType: "application/x-www-form-urlencoded",
      text: "name=web&password=***&vcpu=2",
    });
    expect(made?.request.bodySize).toBe(form.length);
    // JSON that does not parse cannot be masked field by field: only its size is kept.
    const malformed = '{"name": "x", "password": "hunter2-again",}';
    const refused = await t.request("POST", "/v1/media/libraries", {
      key: org.key,
      body: malformed,
      headers: { "content-type": "application/json" },
    });
    expect(refused.status).toBe(400);
    const after = await t.request("GET", `/_cumulo/recording.har?organization_id=${org.organizationId}`);
    const last = (after.body.log.entries as HarEntry[]).at(-1);
    expect(last?.response.status).toBe(400);
    expect(last?.request.postData).toBeUndefined();
    expect(last?.request.bodySize).toBe(malformed.length);
    expect(after.text).not.toContain("hunter2");
  });

  it("cuts bodies at the recording's limit", async () => {
    const org = await t.createOrganization("Small bodies");
    await t.request("POST", "/_cumulo/recording", {
      json: { organization_id: org.organizationId, recording: true, body_limit_bytes: 10 },
    });
    await createLibrary(t, { name: "A library with a long enough name" }, org.key);
    const har = await t.request("GET", `/_cumulo/recording.har?organization_id=${org.organizationId}`);
    const [entry] = har.body.log.entries as HarEntry[];
    expect(entry?.request.postData?.text).toHaveLength(10);
    expect(entry?.response.content.text).toHaveLength(10);
  });
});
