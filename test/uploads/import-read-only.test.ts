import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { videoPath } from "../video/support.ts";

/** Read-only keys never see credentials (docs/security.md, "Read-only keys and secrets"). */
describe("a video import's URL and read-only keys", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_IMPORT_ALLOW_PRIVATE: "true" });
  });
  afterAll(() => t.close());

  it("masks the signature and token of a signed download URL for a read-only key", async () => {
    const created = await t.request("POST", "/v1/organization/api-keys", {
      json: { name: "dashboard", read_only: true },
    });
    const readOnly = created.body.data.api_key as string;
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
});
