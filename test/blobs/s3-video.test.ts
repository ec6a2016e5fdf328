import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { S3BlobStore } from "../../src/blobs/s3.ts";
import { edgeRequest, edgeUrlOf } from "../cdn/support.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { generateClip } from "../support/media.ts";
import { startS3Node, startTestS3, type TestS3 } from "../support/s3.ts";
import { createMigratedTestStore, type TestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import { runUpload, sha256, TUS_PATH } from "../uploads/support.ts";
import { playlistUris, resolvePath, uploadSource, videoPath, waitForStatus } from "../video/support.ts";

const VTT = "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nHello\n";
// 1x1 PNG
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);

function form(fields: Record<string, string>, file: { name: string; content: string | Buffer }) {
  const data = new FormData();
  for (const [name, value] of Object.entries(fields)) data.set(name, value);
  data.set("file", new Blob([file.content]), file.name);
  return data;
}

/**
 * A split deployment on the S3 blob store: an API node, a worker node and an edge node, each with a
 * data dir of its own where the store allows it (PostgreSQL; SQLite's file is in the data dir, so
 * there they share one). No node may keep a media file on its disk: the edge serves what the worker
 * made from what the API received, through the bucket only.
 */
describe("video on the S3 blob store, split across nodes", { timeout: 120_000 }, () => {
  let s3: TestS3;
  let store: TestStore;
  let api: TestApp;
  let worker: TestApp;
  let edgeNode: TestApp;
  let edge: string;
  let work: string;
  let clip: Buffer;
  let libraryId: string;
  let videoId: string;
  const dataDirs: string[] = [];
  const hostname = () => `${libraryId}.media.cumulo.local`;
  const play = (file: string, headers: Record<string, string> = {}) =>
    edgeRequest(edge, `/${hostname()}/${videoId}/${file}`, { headers });
  const keysUnder = (prefix: string) => s3.keys().filter((key) => key.startsWith(`${prefix}/`));

  const node = (roles: string, env: Record<string, string> = {}) =>
    startS3Node({ s3, store, roles, env, dataDirs });

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cumulo-s3-video-"));
    let file: string;
    [s3, store, file] = await Promise.all([
      startTestS3(),
      createMigratedTestStore(),
      generateClip(work, { seconds: 2, width: 320, height: 240 }),
    ]);
    clip = readFileSync(file);
    api = await node("api", { CUMULO_RATE_LIMIT: "100000/1m" });
    worker = await node("worker");
    edgeNode = await node("edge", { CUMULO_EDGE_PORT: "0" });
    edge = edgeUrlOf(edgeNode);
    libraryId = (await createLibrary(api, { name: "S3", default_privacy: "public" })).id;
    videoId = (await createVideo(api, libraryId, { title: "on s3" })).id;
    const accepted = await uploadSource(api, libraryId, videoId, clip);
    expect(accepted.status, accepted.text).toBe(202);
    expect((await waitForStatus(api, libraryId, videoId, ["ready", "failed"], 150_000)).status).toBe("ready");
  }, 180_000); // three nodes and a transcode, on a machine that may be busy

  afterAll(async () => {
    for (const app of [edgeNode, worker, api]) await app?.close();
    await store?.drop();
    await s3?.close();
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  });

  it("keeps the source and every rendition in the bucket, nothing on the nodes' disks", async () => {
    const keys = keysUnder(`media/${libraryId}/${videoId}`);
    const source = keys.filter((key) => key.includes("/source/"));
    expect(source).toHaveLength(1);
    expect(keys).toContain(`media/${libraryId}/${videoId}/renditions/1/playlist.m3u8`);
    expect(keys.some((key) => /\/renditions\/1\/\d+p\/segment_\d+\.ts$/.test(key))).toBe(true);
    for (const dir of dataDirs) {
      const blobs = join(dir, "blobs");
      const files = existsSync(blobs) ? readdirSync(blobs, { recursive: true }) : [];
      expect(files).toEqual([]);
      // The worker's temporary copies go once the job ends (just after the video is ready).
      const scratch = join(dir, "video-work");
      await waitUntil(
        () => !existsSync(scratch) || readdirSync(scratch).length === 0,
        10_000,
        "no scratch files",
      );
    }
  });

  it("serves playlists and a segment with Range from the bucket through the edge", async () => {
    const masterPath = `/${hostname()}/${videoId}/playlist.m3u8`;
    const master = await edgeRequest(edge, masterPath);
    expect(master.status).toBe(200);
    expect(master.text.startsWith("#EXTM3U")).toBe(true);
    const variant = playlistUris(master.text)[0] ?? "";
    const variantPath = resolvePath(masterPath, variant);
    const media = await edgeRequest(edge, variantPath);
    expect(media.status).toBe(200);
    const segmentPath = resolvePath(variantPath, playlistUris(media.text)[0] ?? "");
    expect(segmentPath).toMatch(/segment_\d+\.ts$/);

    const whole = await edgeRequest(edge, segmentPath);
    expect(whole.status).toBe(200);
    expect(whole.headers["content-type"]).toBe("video/mp2t");
    expect(whole.headers["accept-ranges"]).toBe("bytes");
    expect(Number(whole.headers["content-length"])).toBe(whole.body.length);
    const etag = String(whole.headers.etag);
    expect(etag).toMatch(/^"[0-9a-f]+-[0-9a-f]+"$/);

    const part = await edgeRequest(edge, segmentPath, { headers: { range: "bytes=100-1123" } });
    expect(part.status).toBe(206);
    expect(part.headers["content-range"]).toBe(`bytes 100-1123/${whole.body.length}`);
    expect(part.headers.etag).toBe(etag);
    expect(part.body.equals(whole.body.subarray(100, 1124))).toBe(true);
    const tail = await edgeRequest(edge, segmentPath, { headers: { range: "bytes=-10" } });
    expect(tail.status).toBe(206);
    expect(tail.body.equals(whole.body.subarray(-10))).toBe(true);
    const beyond = await edgeRequest(edge, segmentPath, {
      headers: { range: `bytes=${whole.body.length}-` },
    });
    expect(beyond.status).toBe(416);
    expect((await edgeRequest(edge, segmentPath, { headers: { "if-none-match": etag } })).status).toBe(304);

    const mp4 = await play("play.mp4", { range: "bytes=0-7" });
    expect(mp4.status).toBe(206);
    expect(mp4.body.subarray(4, 8).toString()).toBe("ftyp");
  });

  it("stores uploaded thumbnails and subtitles in the bucket and serves them from there", async () => {
    const base = videoPath(libraryId, videoId);
    const thumbnail = await api.request("POST", `${base}/thumbnails`, {
      body: form({}, { name: "poster.png", content: PNG }),
    });
    expect(thumbnail.status, thumbnail.text).toBe(200);
    const subtitle = await api.request("POST", `${base}/subtitles`, {
      body: form({ title: "English", language: "en" }, { name: "en.vtt", content: VTT }),
    });
    expect(subtitle.status, subtitle.text).toBe(201);
    const { id, path } = subtitle.body.data;
    expect(keysUnder(`media/${libraryId}/${videoId}`)).toContain(path);

    const served = await play("thumbnail.jpg");
    expect(served.status).toBe(200);
    expect(served.body.equals(PNG)).toBe(true);
    const vtt = await play(`subtitles/${id}.vtt`);
    expect(vtt.status).toBe(200);
    // As stored, with the map to where the segments start in its header (docs/video.md).
    expect(vtt.text).toMatch(/^WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:\d+,LOCAL:00:00:00.000\n\n/);
    expect(vtt.text.replace(/^X-TIMESTAMP-MAP=.*\n/m, "")).toBe(VTT);

    const removed = await api.request("DELETE", `${base}/subtitles/${id}`);
    expect(removed.status, removed.text).toBeLessThan(300);
    expect(s3.keys()).not.toContain(path);
  });

  it("moves a finished tus upload into the bucket", async () => {
    const tusVideo = (await createVideo(api, libraryId, { title: "resumable" })).id;
    const response = await api.request("POST", `${videoPath(libraryId, tusVideo)}/upload-authorization`, {
      json: {},
    });
    expect(response.status, response.text).toBe(201);
    await runUpload(clip, {
      endpoint: `${api.baseUrl}${TUS_PATH}`,
      chunkSize: 64 * 1024,
      headers: response.body.data.headers,
      metadata: { filename: "clip.mp4", filetype: "video/mp4" },
    });
    const [sourceKey] = keysUnder(`media/${libraryId}/${tusVideo}/source`);
    expect(sourceKey).toBeDefined();
    const chunks: Buffer[] = [];
    for await (const chunk of new S3BlobStore(s3.settings).open(sourceKey ?? ""))
      chunks.push(chunk as Buffer);
    expect(sha256(Buffer.concat(chunks))).toBe(sha256(clip));
    // The API node's partial-upload directory keeps nothing of a finished upload.
    const uploads = join(dataDirs[0] ?? "", "uploads");
    expect(existsSync(uploads) ? readdirSync(uploads) : []).toEqual([]);
    expect((await waitForStatus(api, libraryId, tusVideo, ["ready", "failed"])).status).toBe("ready");
  });

  it("removes a deleted video's objects, then a deleted library's", async () => {
    expect(keysUnder(`media/${libraryId}/${videoId}`).length).toBeGreaterThan(5);
    const deleted = await api.request("DELETE", videoPath(libraryId, videoId));
    expect(deleted.status, deleted.text).toBe(200);
    expect(keysUnder(`media/${libraryId}/${videoId}`)).toEqual([]);
    expect((await play("playlist.m3u8")).status).toBe(404);

    expect(keysUnder(`media/${libraryId}`).length).toBeGreaterThan(0); // the tus video
    const dropped = await api.request("DELETE", `/v1/media/libraries/${libraryId}`);
    expect(dropped.status, dropped.text).toBe(200);
    expect(keysUnder(`media/${libraryId}`)).toEqual([]);
  });
});

describe("a node on an unreachable bucket", () => {
  let s3: TestS3;
  let store: TestStore;
  beforeAll(async () => {
    [s3, store] = await Promise.all([startTestS3(), createMigratedTestStore()]);
  });
  afterAll(async () => {
    await store?.drop();
    await s3?.close();
  });

  it("refuses to start with one line naming the settings", async () => {
    const started = startTestApp({ ...s3.env, CUMULO_S3_BUCKET: "missing-bucket" }, { store });
    await expect(started).rejects.toThrow(/cannot reach S3 bucket "missing-bucket" \(CUMULO_S3_\*\)/);
  });
});
