import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { edgeRequest, edgeUrlOf } from "../cdn/support.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { startTestS3, type TestS3 } from "../support/s3.ts";
import { TUS_PATH } from "../uploads/support.ts";
import { videoPath } from "../video/support.ts";

// 1x1 PNG
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);

const thumbnailForm = () => {
  const data = new FormData();
  data.set("file", new Blob([PNG]), "poster.png");
  return data;
};

/**
 * The bucket going away under a running node: a request that needs it is the store's failure, not
 * the client's and not a bug, so it is answered 503 with Retry-After (uploads and the edge answered
 * 500, which says the server is broken and that trying again will not help).
 */
describe("a running node whose bucket stops answering", { timeout: 60_000 }, () => {
  let s3: TestS3;
  let app: TestApp;
  let libraryId: string;
  let videoId: string;

  beforeAll(async () => {
    s3 = await startTestS3();
    app = await startTestApp({
      ...s3.env,
      CUMULO_ROLES: "api,edge",
      CUMULO_EDGE_PORT: "0",
      CUMULO_RATE_LIMIT: "100000/1m",
      CUMULO_S3_TIMEOUT_MS: "2000",
    });
    libraryId = (await createLibrary(app, { name: "outage", default_privacy: "public" })).id;
    videoId = (await createVideo(app, libraryId, { title: "poster first" })).id;
    const thumbnail = await app.request("POST", `${videoPath(libraryId, videoId)}/thumbnails`, {
      body: thumbnailForm(),
    });
    expect(thumbnail.status, thumbnail.text).toBe(200);
    const served = await edgeRequest(
      edgeUrlOf(app),
      `/${libraryId}.media.cumulo.local/${videoId}/thumbnail.jpg`,
    );
    expect(served.status).toBe(200);
    await s3.close();
  }, 60_000);

  afterAll(async () => {
    await app?.close();
  });

  const expectUnavailable = (status: number, retryAfter: unknown) => {
    expect(status).toBe(503);
    expect(retryAfter).toBe("10");
  };

  it("answers a raw source upload 503 in the media envelope", async () => {
    const response = await app.request("PUT", `${videoPath(libraryId, videoId)}/source`, {
      body: Buffer.from("not yet a video"),
      headers: { "content-type": "video/mp4" },
    });
    expectUnavailable(response.status, response.headers.get("retry-after"));
    expect(response.body).toEqual({
      success: false,
      error: "service_unavailable",
      message: "Media storage is unavailable; try again shortly",
    });
  });

  it("answers a multipart upload 503, not 400 for a body that was fine", async () => {
    const response = await app.request("POST", `${videoPath(libraryId, videoId)}/thumbnails`, {
      body: thumbnailForm(),
    });
    expectUnavailable(response.status, response.headers.get("retry-after"));
    expect(response.body.error).toBe("service_unavailable");
  });

  it("answers the last tus PATCH 503, and a HEAD too while its bytes cannot be moved", async () => {
    const authorized = await app.request("POST", `${videoPath(libraryId, videoId)}/upload-authorization`, {
      json: {},
    });
    expect(authorized.status, authorized.text).toBe(201);
    const headers = { ...authorized.body.data.headers, "tus-resumable": "1.0.0" };
    const created = await fetch(`${app.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: { ...headers, "upload-length": "10" },
    });
    expect(created.status).toBe(201);
    const upload = new URL(created.headers.get("location") ?? "", `${app.baseUrl}${TUS_PATH}/`).href;
    const patched = await fetch(upload, {
      method: "PATCH",
      headers: { ...headers, "upload-offset": "0", "content-type": "application/offset+octet-stream" },
      body: "0123456789",
    });
    expect(patched.status).toBe(503);
    expect(await patched.text()).toBe("Media storage is unavailable; try again shortly\n");
    const head = await fetch(upload, { method: "HEAD", headers });
    expectUnavailable(head.status, head.headers.get("retry-after"));
  });

  it("answers a viewer on the edge 503", async () => {
    const response = await edgeRequest(
      edgeUrlOf(app),
      `/${libraryId}.media.cumulo.local/${videoId}/thumbnail.jpg`,
    );
    expectUnavailable(response.status, response.headers["retry-after"]);
    expect(JSON.parse(response.text)).toEqual({ success: false, message: "Service Unavailable" });
  });
});
