import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { videoPath } from "../video/support.ts";

/** Read-only keys never see credentials (docs/security.md, "Read-only keys and secrets"). */
describe("credentials in URLs and read-only keys", () => {
  let t: TestApp;
  let readOnly: string;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_IMPORT_ALLOW_PRIVATE: "true" });
    const created = await t.request("POST", "/v1/organization/api-keys", {
      json: { name: "dashboard", read_only: true },
    });
    readOnly = created.body.data.api_key;
  });
  afterAll(() => t.close());

  it("masks the signature and token of a signed download URL for a read-only key", async () => {
    const library = await createLibrary(t);
    const video = await createVideo(t, library.id);
    const path = `${videoPath(library.id, video.id)}/source/fetch`;
    // A presigned S3 URL: whoever holds it may read the object until it expires. Nothing listens on
    // port 9, so the import fails; its URL is what is read here.
    const url =
      "http://127.0.0.1:9/bucket/clip.mp4?X-Amz-Expires=604800&X-Amz-Security-Token=session-secret&X-Amz-Signature=abc123";
    expect((await t.request("POST", path, { json: { url } })).status).toBe(202);

    const asReader = await t.request("GET", path, { key: readOnly });
    expect(asReader.status).toBe(200);
    expect(asReader.body.data.url).toBe(
      "http://127.0.0.1:9/bucket/clip.mp4?X-Amz-Expires=604800&X-Amz-Security-Token=***&X-Amz-Signature=***",
    );
    expect((await t.request("GET", path)).body.data.url).toBe(url);
  });

  it("masks the password of a URL's user info, in an import and a CDN origin, for a read-only key", async () => {
    const library = await createLibrary(t);
    const video = await createVideo(t, library.id);
    const path = `${videoPath(library.id, video.id)}/source/fetch`;
    const url = "http://reader:import-password@127.0.0.1:9/clip.mp4";
    expect((await t.request("POST", path, { json: { url } })).status).toBe(202);
    expect((await t.request("GET", path, { key: readOnly })).body.data.url).toBe(
      "http://reader:***@127.0.0.1:9/clip.mp4",
    );

    const origin = "https://cdn-user:origin-password@origin.example.com/files?key=origin-key";
    const created = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname: "read-only-urls.example.com", origin_url: origin },
    });
    expect(created.status).toBe(201);
    const shown = "https://cdn-user:***@origin.example.com/files?key=***";
    const one = await t.request("GET", `/v1/cdn/distributions/${created.body.data.id}`, { key: readOnly });
    expect(one.body.data.origin_url).toBe(shown);
    const listed = await t.request("GET", "/v1/cdn/distributions", { key: readOnly });
    const row = listed.body.data.find((item: { id: string }) => item.id === created.body.data.id);
    expect(row.origin_url).toBe(shown);
    // Library distributions' own origin is no credential and stays as it is.
    expect(
      listed.body.data.some((item: { origin_url: string }) => item.origin_url.startsWith("media://")),
    ).toBe(true);
    expect(listed.text).not.toContain("password");
    expect(
      (await t.request("GET", `/v1/cdn/distributions/${created.body.data.id}`)).body.data.origin_url,
    ).toBe(origin);
  });

  it("masks secret-looking path segments of an import URL and a CDN origin for a read-only key", async () => {
    const library = await createLibrary(t);
    const video = await createVideo(t, library.id);
    const path = `${videoPath(library.id, video.id)}/source/fetch`;
    // A share link whose path is its credential (the file name stays readable), with an Azure
    // shared access signature (`sig`) for good measure.
    const url =
      "http://127.0.0.1:9/s/Qm9vZ2xlU2hhcmUxMjM0NTY3ODk/h264-1080p-clip.mp4?sv=2022-11-02&sig=c2lnbmF0dXJl";
    expect((await t.request("POST", path, { json: { url } })).status).toBe(202);
    expect((await t.request("GET", path, { key: readOnly })).body.data.url).toBe(
      "http://127.0.0.1:9/s/***/h264-1080p-clip.mp4?sv=2022-11-02&sig=***",
    );
    expect((await t.request("GET", path)).body.data.url).toBe(url);

    const origin = "https://origin.example.com/tenants/9b2f4c1e-6d3a-4e8b-a1f0-5c7d9e2b4a68/files";
    const created = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname: "read-only-paths.example.com", origin_url: origin },
    });
    expect(created.status).toBe(201);
    const one = await t.request("GET", `/v1/cdn/distributions/${created.body.data.id}`, { key: readOnly });
    expect(one.body.data.origin_url).toBe("https://origin.example.com/tenants/***/files");
    expect(
      (await t.request("GET", `/v1/cdn/distributions/${created.body.data.id}`)).body.data.origin_url,
    ).toBe(origin);
  });
});
