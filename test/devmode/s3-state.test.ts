import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renditionPrefix } from "../../src/video/pipeline.ts";
import { createLibrary } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { startTestS3, type TestS3 } from "../support/s3.ts";
import { waitUntil } from "../support/wait.ts";
import { uploadSource } from "../video/support.ts";

/**
 * Developer mode on a node whose media files are in an S3 bucket: a reset empties the bucket as it
 * empties the store (it emptied only the local blobs folder, which such a node does not use), and
 * snapshots, which copy that folder, are refused instead of saving rows without their files.
 */
describe("developer mode with media files in a bucket", { timeout: 120_000 }, () => {
  let s3: TestS3;
  let t: TestApp;

  beforeAll(async () => {
    s3 = await startTestS3();
    t = await startTestApp({
      ...s3.env,
      CUMULO_DEV_MODE: "true",
      CUMULO_DEV_VIDEOS: "instant",
      CUMULO_RATE_LIMIT: "100000/1m",
    });
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    await s3?.close();
  });

  /** A library with a processed video; answers whether its rendition is in the bucket. */
  async function processedVideo(key: string, name: string) {
    const libraryId = (await createLibrary(t, { name }, key)).id;
    const created = await t.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
      key,
      json: { title: name },
    });
    const videoId = created.body.data.id;
    const uploaded = await uploadSource(t, libraryId, videoId, new Uint8Array([1, 2, 3]), "video/mp4", key);
    expect(uploaded.status).toBe(202);
    // The first instant video makes the placeholder with ffmpeg: up to a minute on a busy machine.
    await waitUntil(
      async () => {
        const path = `/v1/media/libraries/${libraryId}/videos/${videoId}`;
        return (await t.request("GET", path, { key })).body.data.status === "ready";
      },
      60_000,
      "the video processed",
    );
    const file = `${renditionPrefix(libraryId, videoId, 1)}/playlist.m3u8`;
    return () => t.cumulo.services.blobs.exists(file);
  }

  it("removes one organization's files from the bucket, then every file on a full reset", async () => {
    const other = await t.createOrganization("Bucket tenant");
    const theirs = await processedVideo(other.key, "Theirs");
    const mine = await processedVideo(t.adminKey, "Mine");
    expect(await theirs()).toBe(true);

    const reset = await t.request("POST", "/_cumulo/state/reset", {
      json: { organization_id: other.organizationId, to: "bootstrap" },
    });
    expect(reset.status, reset.text).toBe(200);
    expect(await theirs()).toBe(false);
    expect(await mine()).toBe(true);

    const full = await t.request("POST", "/_cumulo/state/reset", { json: {} });
    expect(full.status, full.text).toBe(200);
    expect(await mine()).toBe(false);
  });

  it("refuses to save or load a snapshot, which would hold rows without their files", async () => {
    const message =
      "Snapshots copy the local blobs folder; this node keeps its media files in an S3 bucket (CUMULO_BLOB_STORE=s3)";
    const saved = await t.request("PUT", "/_cumulo/state/snapshots/in_bucket", { json: {} });
    expect(saved.status).toBe(409);
    expect(saved.body.message).toBe(message);
    const loaded = await t.request("POST", "/_cumulo/state/snapshots/in_bucket/load", { json: {} });
    expect(loaded.status).toBe(409);
    expect(loaded.body.message).toBe(message);
  });
});
