import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { webhooksPath } from "../webhooks/helpers.ts";

interface HarEntry {
  request: {
    method: string;
    url: string;
    headers: { name: string; value: string }[];
    postData?: { text: string };
  };
  response: { status: number; content: { text: string } };
  time: number;
}

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
      { organization_id: org.organizationId, recording: false, entries: 3 },
    ]);
    expect(
      (await t.request("DELETE", `/_cumulo/recording?organization_id=${org.organizationId}`)).status,
    ).toBe(204);
    const empty = await t.request("GET", `/_cumulo/recording.har?organization_id=${org.organizationId}`);
    expect(empty.body.log.entries).toEqual([]);
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
