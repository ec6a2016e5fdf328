import { once } from "node:events";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import * as tus from "tus-js-client";
import { Upload, type UploadOptions } from "tus-js-client";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { OffsetClock } from "../../src/clock.ts";
import { capturingLogger } from "../fuzz/log-capture.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { generateClip } from "../support/media.ts";
import { createMigratedTestStore, type TestStore, testStoreKind } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import { uploadSource, videoPath, waitForStatus } from "../video/support.ts";
import { createEndpoint, type Receiver, startReceiver } from "../webhooks/helpers.ts";
import { runUpload, sha256, startCuttingProxy, storedSource, TUS_PATH } from "./support.ts";

const MAX_VIDEO_BYTES = 8 * 1024 * 1024;
const CHUNK = 64 * 1024;
const OPEN_UPLOADS_PER_VIDEO = 3;
/** tus-js-client's Node storage of upload URLs (a JSON file), which its type declarations leave out. */
const FileUrlStorage = (
  tus as unknown as { FileUrlStorage: new (path: string) => UploadOptions["urlStorage"] }
).FileUrlStorage;
const STAGES = ["uploading", "processing", "transcoding", "packaging", "ready"];

describe("resumable uploads (tus) with tus-js-client", () => {
  let t: TestApp;
  let work: string;
  let clip: Buffer;
  let libraryId: string;
  let receiver: Receiver;
  const auth = () => ({ authorization: `Bearer ${t.adminKey}` });
  const newVideo = async () => (await createVideo(t, libraryId)).id;
  const metadataFor = (videoId: string) => ({
    library_id: libraryId,
    video_id: videoId,
    filename: "clip.mp4",
  });
  /** A tus creation by hand for `videoId`, with the first bytes when given; its answer and upload id. */
  const createUpload = async (videoId: string, length: number, firstBytes?: Uint8Array) => {
    const created = await fetch(`${t.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: {
        ...auth(),
        "tus-resumable": "1.0.0",
        "upload-length": String(length),
        "upload-metadata": `library_id ${btoa(libraryId)},video_id ${btoa(videoId)}`,
        ...(firstBytes ? { "content-type": "application/offset+octet-stream" } : {}),
      },
      body: firstBytes,
    });
    return { created, id: (created.headers.get("location") ?? "").split("/").pop() ?? "" };
  };
  const tusHeaders = () => ({ ...auth(), "tus-resumable": "1.0.0" });
  /**
   * An upload of the whole clip whose last PATCH could not move it into the blob store: a file where
   * the video's source directory goes fails the move as a full disk does. Its id, that PATCH's
   * answer, and `unblock`, after which a move succeeds.
   */
  const strandUpload = async (videoId: string) => {
    const { id } = await createUpload(videoId, clip.length);
    const blocker = join(t.store.dataDir, "blobs", "media", libraryId, videoId, "source");
    mkdirSync(dirname(blocker), { recursive: true });
    writeFileSync(blocker, "");
    const last = await fetch(`${t.baseUrl}${TUS_PATH}/${id}`, {
      method: "PATCH",
      headers: { ...tusHeaders(), "upload-offset": "0", "content-type": "application/offset+octet-stream" },
      body: clip,
    });
    return { id, last, unblock: () => rmSync(blocker) };
  };

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cumulo-tus-"));
    receiver = await startReceiver();
    let file: string;
    [t, file] = await Promise.all([
      startTestApp({
        CUMULO_RATE_LIMIT: "100000/1m",
        CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
        CUMULO_MAX_VIDEO_BYTES: String(MAX_VIDEO_BYTES),
        CUMULO_FFMPEG_CONCURRENCY: "1",
        CUMULO_MAX_OPEN_UPLOADS_PER_VIDEO: String(OPEN_UPLOADS_PER_VIDEO),
      }),
      generateClip(work, { seconds: 3, width: 640, height: 360 }),
    ]);
    clip = readFileSync(file);
    libraryId = (await createLibrary(t)).id;
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("uploads a generated video in chunks; the video goes through the pipeline with its events", async () => {
    await createEndpoint(t, libraryId, { url: `${receiver.url}/hook` });
    const videoId = await newVideo();
    const chunks: number[] = [];
    const upload = await runUpload(clip, {
      endpoint: `${t.baseUrl}${TUS_PATH}`,
      chunkSize: CHUNK,
      headers: auth(),
      metadata: metadataFor(videoId),
      onChunkComplete: (size) => chunks.push(size),
    });
    expect(chunks.length).toBe(Math.ceil(clip.length / CHUNK));
    expect(upload.url).toMatch(new RegExp(`^${t.baseUrl}${TUS_PATH}/[0-9a-f]+$`));
    const ready = await waitForStatus(t, libraryId, videoId, ["ready", "failed"]);
    expect(ready.status).toBe("ready");
    expect(ready.duration).toBe(3);
    expect(sha256(await storedSource(t, videoId))).toBe(sha256(clip));

    const events = await waitUntil(() => {
      const mine = receiver.received
        .map((r) => JSON.parse(r.body))
        .filter((b) => b.payload?.video_id === videoId);
      return mine.some((body) => body.event === "ready") ? mine : undefined;
    }, 60_000);
    expect(events.map((event) => event.event)).toEqual(["created", ...STAGES]);

    // A finished upload still answers HEAD with its full offset (a client that missed the last answer).
    const head = await fetch(upload.url ?? "", {
      method: "HEAD",
      headers: tusHeaders(),
    });
    expect(head.status).toBe(200);
    expect(head.headers.get("upload-offset")).toBe(String(clip.length));
  });

  it("takes PATCH sent as POST with X-HTTP-Method-Override (tus-js-client's overridePatchMethod)", async () => {
    // For clients behind proxies that drop PATCH: it was 404 (QA of 4 December).
    const videoId = await newVideo();
    const upload = await runUpload(clip, {
      endpoint: `${t.baseUrl}${TUS_PATH}`,
      chunkSize: CHUNK,
      headers: auth(),
      metadata: metadataFor(videoId),
      overridePatchMethod: true,
    });
    expect(sha256(await storedSource(t, videoId))).toBe(sha256(clip));
    const head = await fetch(upload.url ?? "", {
      method: "POST",
      headers: { ...tusHeaders(), "x-http-method-override": "HEAD" },
    });
    expect([head.status, head.headers.get("upload-offset")]).toEqual([200, String(clip.length)]);
    const other = await fetch(upload.url ?? "", { method: "POST", headers: tusHeaders() });
    expect(other.status).toBe(404);
  });

  it("keeps nothing of a creation with upload whose connection was cut before its body ended", async () => {
    // No client got its Location: the record and partial file were kept a day (QA of 4 December).
    const videoId = await newVideo();
    const { port } = new URL(t.baseUrl);
    const socket = connect(Number(port), "127.0.0.1");
    await once(socket, "connect");
    const metadata = `library_id ${btoa(libraryId)},video_id ${btoa(videoId)}`;
    socket.write(
      `POST ${TUS_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${t.adminKey}\r\n` +
        `Tus-Resumable: 1.0.0\r\nUpload-Length: ${clip.length}\r\nUpload-Metadata: ${metadata}\r\n` +
        `Content-Type: application/offset+octet-stream\r\nContent-Length: ${clip.length}\r\n\r\n`,
    );
    socket.write(clip.subarray(0, Math.floor(clip.length / 3)));
    const uploadsOf = () =>
      t.cumulo.store.db.selectFrom("video_uploads").select("id").where("video_id", "=", videoId).execute();
    // The upload is made once its first bytes are read; then the connection goes.
    const [made] = await waitUntil(
      async () => {
        const rows = await uploadsOf();
        return rows.length > 0 ? rows : undefined;
      },
      10_000,
      "the upload",
    );
    const partial = join(t.store.dataDir, "uploads", made?.id ?? "none");
    await waitUntil(() => (existsSync(partial) ? true : undefined), 10_000, "its partial file");
    socket.destroy();
    await waitUntil(
      async () => ((await uploadsOf()).length === 0 ? true : undefined),
      10_000,
      "no upload left",
    );
    expect(existsSync(partial)).toBe(false);
  });

  it("resumes after the connection drops mid-PATCH, from the bytes the server kept", async () => {
    const videoId = await newVideo();
    const proxy = await startCuttingProxy(t.baseUrl);
    const offsets: number[] = [];
    let uploadId = "";
    try {
      // One PATCH for the whole file, held when 40% of it went through, cut once the server wrote some.
      const held = proxy.holdAfter(Math.floor(clip.length * 0.4));
      const finished = runUpload(clip, {
        endpoint: `${proxy.url}${TUS_PATH}`,
        headers: auth(),
        metadata: metadataFor(videoId),
        retryDelays: [0, 200, 500, 1000],
        onAfterResponse: (request, response) => {
          if (request.getMethod() === "POST")
            uploadId = (response.getHeader("Location") ?? "").split("/").pop() ?? "";
          if (request.getMethod() === "HEAD") offsets.push(Number(response.getHeader("Upload-Offset")));
        },
      });
      await held;
      const partial = join(t.store.dataDir, "uploads", uploadId);
      await waitUntil(() => (existsSync(partial) && statSync(partial).size > 0 ? true : undefined));
      proxy.cutHeld();
      await finished;
    } finally {
      await proxy.close();
    }
    expect(proxy.cuts).toBe(1);
    // The client asked where to go on, and went on from the part of the cut request the server kept.
    expect(offsets.length).toBe(1);
    expect(offsets[0]).toBeGreaterThan(0);
    expect(offsets[0]).toBeLessThan(clip.length);
    expect(sha256(await storedSource(t, videoId))).toBe(sha256(clip));
    expect((await waitForStatus(t, libraryId, videoId, ["ready", "failed"])).status).toBe("ready");
  });

  it("refuses uploads over the size limit at creation and while receiving a deferred length", async () => {
    const videoId = await newVideo();
    const metadata = `library_id ${btoa(libraryId)},video_id ${btoa(videoId)}`;
    const tooLong = await fetch(`${t.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: {
        ...auth(),
        "tus-resumable": "1.0.0",
        "upload-length": String(MAX_VIDEO_BYTES + 1),
        "upload-metadata": metadata,
      },
    });
    expect(tooLong.status).toBe(413);
    // A creation with more bytes than its Upload-Length: 413, and no upload is left for the video.
    const overfull = (init: RequestInit) =>
      fetch(`${t.baseUrl}${TUS_PATH}`, {
        method: "POST",
        headers: {
          ...auth(),
          "tus-resumable": "1.0.0",
          "upload-length": "10",
          "upload-metadata": metadata,
          "content-type": "application/offset+octet-stream",
        },
        ...init,
      });
    const uploadsOfVideo = () =>
      t.cumulo.store.db.selectFrom("video_uploads").select("id").where("video_id", "=", videoId).execute();
    // With its length declared, it is refused before the upload exists.
    const declared = await overfull({ body: new Uint8Array(20) });
    expect(declared.status).toBe(413);
    expect(await declared.json()).toEqual({ success: false, message: "Payload Too Large" });
    expect(await uploadsOfVideo()).toEqual([]);
    // Chunked, its length is known only as the bytes arrive: the upload made first is removed again.
    const chunked = await overfull({
      body: new Blob([new Uint8Array(100)]).stream(),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(chunked.headers.get("location")).toBeNull();
    expect(await uploadsOfVideo()).toEqual([]);

    const deferred = await fetch(`${t.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: {
        ...auth(),
        "tus-resumable": "1.0.0",
        "upload-defer-length": "1",
        "upload-metadata": metadata,
      },
    });
    expect(deferred.status).toBe(201);
    const url = new URL(deferred.headers.get("location") ?? "", `${t.baseUrl}${TUS_PATH}/`).toString();
    const over = await fetch(url, {
      method: "PATCH",
      headers: {
        ...auth(),
        "tus-resumable": "1.0.0",
        "upload-offset": "0",
        "content-type": "application/offset+octet-stream",
      },
      body: new Uint8Array(MAX_VIDEO_BYTES + 1024),
    });
    expect(over.status).toBe(413);
    // Nothing past the limit was kept.
    const head = await fetch(url, { method: "HEAD", headers: tusHeaders() });
    expect(Number(head.headers.get("upload-offset"))).toBeLessThanOrEqual(MAX_VIDEO_BYTES);
  });

  it("terminates an upload: its bytes and record are gone", async () => {
    const { created, id } = await createUpload(await newVideo(), clip.length, clip.subarray(0, 1000));
    expect(created.status).toBe(201);
    // The standard reason phrases, not the empty ones the tus server's web responses carry.
    expect(created.statusText).toBe("Created");
    expect(created.headers.get("upload-offset")).toBe("1000");
    // As every API answer: no shared cache keeps one (QA of 5 December, session 43).
    expect(created.headers.get("cache-control")).toBe("no-store");
    const preflight = await fetch(`${t.baseUrl}${TUS_PATH}`, { method: "OPTIONS" });
    expect([preflight.status, preflight.headers.get("cache-control")]).toEqual([204, "no-store"]);
    const file = join(t.store.dataDir, "uploads", id);
    expect(existsSync(file)).toBe(true);
    const url = `${t.baseUrl}${TUS_PATH}/${id}`;
    const deleted = await fetch(url, { method: "DELETE", headers: tusHeaders() });
    expect(deleted.status).toBe(204);
    expect(deleted.headers.get("cache-control")).toBe("no-store");
    expect(deleted.statusText).toBe("No Content");
    expect(existsSync(file)).toBe(false);
    const head = await fetch(url, { method: "HEAD", headers: tusHeaders() });
    expect(head.status).toBe(404);
  });

  it("leaves no file behind when the video is deleted while its last bytes arrive", async () => {
    const videoId = await newVideo();
    const { id } = await createUpload(videoId, clip.length);
    const file = join(t.store.dataDir, "uploads", id);
    let sendRest: () => void = () => undefined;
    const restMaySend = new Promise<void>((resolve) => {
      sendRest = resolve;
    });
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(clip.subarray(0, 1000));
        await restMaySend;
        controller.enqueue(clip.subarray(1000));
        controller.close();
      },
    });
    const patching = fetch(`${t.baseUrl}${TUS_PATH}/${id}`, {
      method: "PATCH",
      headers: {
        ...auth(),
        "tus-resumable": "1.0.0",
        "upload-offset": "0",
        "content-type": "application/offset+octet-stream",
      },
      body,
      duplex: "half",
    } as RequestInit);
    await waitUntil(async () => existsSync(file) && statSync(file).size >= 1000, 10_000, "the first bytes");
    expect((await t.request("DELETE", videoPath(libraryId, videoId))).status).toBe(200);
    sendRest();
    expect((await patching).status).toBe(404);
    expect(existsSync(file)).toBe(false);
  });

  it("finishes on the next HEAD an upload whose bytes could not be moved into the blob store", async () => {
    const videoId = await newVideo();
    const { id, last, unblock } = await strandUpload(videoId);
    expect(last.status).toBe(500);
    // The disk's own error (a path here) stays in the log.
    expect(await last.text()).toBe("Internal server error\n");
    const head = () => fetch(`${t.baseUrl}${TUS_PATH}/${id}`, { method: "HEAD", headers: tusHeaders() });
    // Not yet moved: no answer may say the upload is complete.
    expect((await head()).status).toBe(500);
    expect((await t.request("GET", videoPath(libraryId, videoId))).body.data.status).toBe("created");

    unblock();
    const resumed = await head();
    expect(resumed.status).toBe(200);
    expect(resumed.headers.get("upload-offset")).toBe(String(clip.length));
    expect((await waitForStatus(t, libraryId, videoId, ["ready", "failed"])).status).toBe("ready");
    expect(sha256(await storedSource(t, videoId))).toBe(sha256(clip));
  });

  it("does not let an upload stranded before the video got a newer source replace it", async () => {
    const videoId = await newVideo();
    const { id, last, unblock } = await strandUpload(videoId);
    expect(last.status).toBe(500);
    unblock();
    // Meanwhile the customer gives the video its source in one request.
    const newer = clip.subarray(0, clip.length - 1);
    expect((await uploadSource(t, libraryId, videoId, newer)).status).toBe(202);

    const head = await fetch(`${t.baseUrl}${TUS_PATH}/${id}`, { method: "HEAD", headers: tusHeaders() });
    // Refused and removed: the upload never becomes the source.
    expect(head.status).toBe(409);
    expect((await waitForStatus(t, libraryId, videoId, ["ready", "failed"])).status).toBe("ready");
    expect(sha256(await storedSource(t, videoId))).toBe(sha256(newer));
    const processing = await t.request("GET", `${videoPath(libraryId, videoId)}/processing`);
    expect(processing.body.data.uploads).toBe(1);
    expect(existsSync(join(t.store.dataDir, "uploads", id))).toBe(false);
  });

  it("lets an upload whose last byte arrives after another source replace it: the source given last wins", async () => {
    const videoId = await newVideo();
    const { id } = await createUpload(videoId, clip.length);
    expect((await uploadSource(t, libraryId, videoId, clip.subarray(0, clip.length - 1))).status).toBe(202);
    const last = await fetch(`${t.baseUrl}${TUS_PATH}/${id}`, {
      method: "PATCH",
      headers: { ...tusHeaders(), "upload-offset": "0", "content-type": "application/offset+octet-stream" },
      body: clip,
    });
    expect(last.status).toBe(204);
    expect((await waitForStatus(t, libraryId, videoId, ["ready", "failed"])).status).toBe("ready");
    expect(sha256(await storedSource(t, videoId))).toBe(sha256(clip));
  });

  it("acts only on the upload named by the path, whatever the query string names", async () => {
    const victim = await createUpload(await newVideo(), 20, new TextEncoder().encode("12345"));
    expect(victim.created.status).toBe(201);
    // The attacker's own upload, in another organization, and a query string naming the victim's.
    const other = await t.createOrganization();
    const otherLibrary = (
      await t.request("POST", "/v1/media/libraries", { json: { name: "Other" }, key: other.key })
    ).body.data.id;
    const otherVideo = (
      await t.request("POST", `/v1/media/libraries/${otherLibrary}/videos`, {
        json: { title: "x" },
        key: other.key,
      })
    ).body.data.id;
    const own = await fetch(`${t.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${other.key}`,
        "tus-resumable": "1.0.0",
        "upload-length": "20",
        "upload-metadata": `library_id ${btoa(otherLibrary)},video_id ${btoa(otherVideo)}`,
      },
    });
    const ownId = (own.headers.get("location") ?? "").split("/").pop() ?? "";
    const tricked = `${t.baseUrl}${TUS_PATH}/${ownId}?x=/${victim.id}`;
    const headers = { authorization: `Bearer ${other.key}`, "tus-resumable": "1.0.0" };

    const head = await fetch(tricked, { method: "HEAD", headers });
    expect(head.headers.get("upload-offset")).toBe("0");
    const patch = await fetch(tricked, {
      method: "PATCH",
      headers: { ...headers, "upload-offset": "5", "content-type": "application/offset+octet-stream" },
      body: "EVIL-BYTES-FROM-B!!",
    });
    expect(patch.status).toBe(409);
    expect((await fetch(tricked, { method: "DELETE", headers })).status).toBe(204);

    const victimHead = await fetch(`${t.baseUrl}${TUS_PATH}/${victim.id}`, {
      method: "HEAD",
      headers: tusHeaders(),
    });
    expect(victimHead.status).toBe(200);
    expect(victimHead.headers.get("upload-offset")).toBe("5");
    expect(readFileSync(join(t.store.dataDir, "uploads", victim.id), "utf8")).toBe("12345");
  });

  it("keeps uploads to their organization and validates the creation request in the contract's shape", async () => {
    const videoId = await newVideo();
    const other = await t.createOrganization();
    const { created } = await createUpload(videoId, 10);
    const url = new URL(created.headers.get("location") ?? "", `${t.baseUrl}${TUS_PATH}/`).toString();
    const tusHeader = { "tus-resumable": "1.0.0" };

    // Another organization can neither see, continue nor terminate it, nor upload to this video.
    for (const method of ["HEAD", "DELETE"]) {
      const response = await fetch(url, {
        method,
        headers: { authorization: `Bearer ${other.key}`, ...tusHeader },
      });
      expect(response.status).toBe(404);
    }
    const patch = await fetch(url, {
      method: "PATCH",
      headers: {
        authorization: `Bearer ${other.key}`,
        ...tusHeader,
        "upload-offset": "0",
        "content-type": "application/offset+octet-stream",
      },
      body: "0123456789",
    });
    expect(patch.status).toBe(404);
    expect(await patch.json()).toEqual({ success: false, message: "Resource not found" });
    const foreign = await fetch(`${t.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${other.key}`,
        ...tusHeader,
        "upload-length": "10",
        "upload-metadata": `library_id ${btoa(libraryId)},video_id ${btoa(videoId)}`,
      },
    });
    expect(foreign.status).toBe(404);

    const anonymous = await fetch(`${t.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: { ...tusHeader, "upload-length": "10" },
    });
    expect(anonymous.status).toBe(401);
    expect(await anonymous.json()).toMatchObject({ success: false, error: "unauthorized" });
    const unnamed = await fetch(`${t.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: { ...auth(), ...tusHeader, "upload-length": "10" },
    });
    expect(unnamed.status).toBe(400);
    expect(((await unnamed.json()) as any).errors.map((e: { field: string }) => e.field)).toEqual([
      "library_id",
      "video_id",
    ]);
    const empty = await fetch(`${t.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: {
        ...auth(),
        ...tusHeader,
        "upload-length": "0",
        "upload-metadata": `library_id ${btoa(libraryId)},video_id ${btoa(videoId)}`,
      },
    });
    expect(empty.status).toBe(400);
    const noVersion = await fetch(`${t.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: { ...auth(), "upload-length": "10" },
    });
    expect(noVersion.status).toBe(412);
    expect(await noVersion.json()).toMatchObject({ success: false });
  });

  it("answers bad tus headers in the contract's shape, with the protocol's headers", async () => {
    const videoId = await newVideo();
    const metadata = `library_id ${btoa(libraryId)},video_id ${btoa(videoId)}`;
    const create = (headers: Record<string, string>) =>
      fetch(`${t.baseUrl}${TUS_PATH}`, {
        method: "POST",
        headers: { ...tusHeaders(), "upload-metadata": metadata, ...headers },
      });
    const fieldsOf = async (response: Response) =>
      Object.fromEntries(
        ((await response.json()) as { errors: { field: string; code: string }[] }).errors.map((e) => [
          e.field,
          e.code,
        ]),
      );

    // tus 1.0: another version is 412 with Tus-Version; every answer but OPTIONS' has Tus-Resumable.
    const otherVersion = await create({ "tus-resumable": "0.2.2", "upload-length": "10" });
    expect(otherVersion.status).toBe(412);
    expect(otherVersion.headers.get("tus-version")).toBe("1.0.0");
    expect(otherVersion.headers.get("tus-resumable")).toBe("1.0.0");
    expect(await otherVersion.json()).toMatchObject({ success: false });

    for (const [headers, fields] of [
      [{ "upload-length": "0x10" }, { "Upload-Length": "validation_type" }],
      [{ "upload-length": "1e3" }, { "Upload-Length": "validation_type" }],
      [{ "upload-length": "-1" }, { "Upload-Length": "validation_type" }],
      [{ "upload-length": "99999999999999999999" }, { "Upload-Length": "validation_type" }],
      [{ "upload-length": "0" }, { "Upload-Length": "validation_min" }],
      // The tus server answered leading zeros in plain text.
      [{ "upload-length": "0100" }, { "Upload-Length": "validation_type" }],
      [{}, { "Upload-Length": "validation_required" }],
      [{ "upload-defer-length": "2" }, { "Upload-Defer-Length": "validation_enum" }],
      [{ "upload-length": "10", "upload-defer-length": "1" }, { "Upload-Defer-Length": "validation_format" }],
      [
        { "upload-length": "10", "upload-metadata": "library_id !!!" },
        { "Upload-Metadata": "validation_format" },
      ],
      // PostgreSQL's jsonb cannot hold a NUL: it was a 500 there, and kept as sent on SQLite.
      [
        { "upload-length": "10", "upload-metadata": `${metadata},filename ${btoa("a\u0000b.mp4")}` },
        { "Upload-Metadata.filename": "validation_format" },
      ],
      // Bytes that are not UTF-8 were read as U+FFFD: HEAD gave back other metadata than was sent.
      [
        {
          "upload-length": "10",
          "upload-metadata": `${metadata},filename ${Buffer.from([0x61, 0xff, 0xfe]).toString("base64")}`,
        },
        { "Upload-Metadata.filename": "validation_format" },
      ],
    ] as const) {
      const refused = await create(headers);
      expect(refused.status, JSON.stringify(headers)).toBe(400);
      expect(refused.headers.get("tus-resumable")).toBe("1.0.0");
      expect(await fieldsOf(refused), JSON.stringify(headers)).toEqual(fields);
    }

    const created = await create({ "upload-length": "10" });
    expect(created.status).toBe(201);
    expect(created.headers.get("access-control-expose-headers")).toMatch(/\bUpload-Expires\b/);
    const url = new URL(created.headers.get("location") ?? "", `${t.baseUrl}${TUS_PATH}/`).toString();
    const patch = (headers: Record<string, string>, body = "01234") =>
      fetch(url, {
        method: "PATCH",
        headers: { ...tusHeaders(), ...headers },
        body,
      });
    const bytes = { "content-type": "application/offset+octet-stream" };
    const noOffset = await patch(bytes);
    expect(noOffset.status).toBe(400);
    expect(await fieldsOf(noOffset)).toEqual({ "Upload-Offset": "validation_required" });
    const plusOffset = await patch({ ...bytes, "upload-offset": "+0" });
    expect(await fieldsOf(plusOffset)).toEqual({ "Upload-Offset": "validation_type" });
    const lengthAgain = await patch({ ...bytes, "upload-offset": "0", "upload-length": "10" });
    expect(await fieldsOf(lengthAgain)).toEqual({ "Upload-Length": "validation_format" });
    const zeroOffset = await patch({ ...bytes, "upload-offset": "00" });
    expect(await fieldsOf(zeroOffset)).toEqual({ "Upload-Offset": "validation_type" });
    // A deferred length below the bytes sent was answered "Upload-Length ... header required".
    const deferred = await create({ "upload-defer-length": "1" });
    const deferredUrl = new URL(
      deferred.headers.get("location") ?? "",
      `${t.baseUrl}${TUS_PATH}/`,
    ).toString();
    const first = await fetch(deferredUrl, {
      method: "PATCH",
      headers: { ...tusHeaders(), ...bytes, "upload-offset": "0" },
      body: "0123456789",
    });
    expect(first.status).toBe(204);
    const shorter = await fetch(deferredUrl, {
      method: "PATCH",
      headers: { ...tusHeaders(), ...bytes, "upload-offset": "10", "upload-length": "5" },
      body: "",
    });
    expect([shorter.status, await fieldsOf(shorter)]).toEqual([400, { "Upload-Length": "validation_min" }]);
    // Refused by its type whatever it holds: malformed JSON is not parsed first.
    for (const [type, body] of [
      ["application/json", '{"a":1}'],
      ["application/json", "not json"],
      ["text/plain", '{"a":1}'],
      ["application/octet-stream", '{"a":1}'],
    ]) {
      const wrongType = await patch({ "content-type": type as string, "upload-offset": "0" }, body);
      expect(wrongType.status, `${type} ${body}`).toBe(415);
      expect(await wrongType.json()).toEqual({ success: false, message: "Unsupported Media Type" });
    }
    const jsonCreation = await fetch(`${t.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: {
        ...auth(),
        "tus-resumable": "1.0.0",
        "upload-length": "10",
        "upload-metadata": `library_id ${btoa(libraryId)},video_id ${btoa(await newVideo())}`,
        "content-type": "application/json",
      },
      body: "not json",
    });
    expect(jsonCreation.status).toBe(415);
    // Media types are case-insensitive and may carry parameters.
    const written = await patch({
      "content-type": "Application/Offset+Octet-Stream; charset=binary",
      "upload-offset": "0",
    });
    expect(written.status).toBe(204);
    expect(written.headers.get("upload-offset")).toBe("5");
  });

  it("keeps at most CUMULO_MAX_OPEN_UPLOADS_PER_VIDEO unfinished uploads of a video: one more removes the oldest with its bytes", async () => {
    // Whoever holds a video's signed upload authorization could otherwise fill the disk, one
    // upload after another, each kept until it expires (audit of 2 December, second pass).
    const videoId = await newVideo();
    const ids: string[] = [];
    for (let made = 0; made < OPEN_UPLOADS_PER_VIDEO + 2; made += 1) {
      const { created, id } = await createUpload(videoId, clip.length, clip.subarray(0, 100));
      expect(created.status).toBe(201);
      ids.push(id);
    }
    const kept = ids.slice(-OPEN_UPLOADS_PER_VIDEO);
    expect(await t.cumulo.services.uploads.resumable.find(ids[0] ?? "")).toBeUndefined();
    for (const id of ids) {
      const head = await fetch(`${t.baseUrl}${TUS_PATH}/${id}`, { method: "HEAD", headers: tusHeaders() });
      expect(head.status).toBe(kept.includes(id) ? 200 : 404);
      expect(existsSync(join(t.store.dataDir, "uploads", id))).toBe(kept.includes(id));
    }
    // Another video's uploads are not counted with these.
    const other = await createUpload(await newVideo(), clip.length);
    expect(other.created.status).toBe(201);
    for (const id of kept) expect(await t.cumulo.services.uploads.resumable.find(id)).toBeDefined();
  });

  it("keeps the limit, records and bytes alike, when creations on one video arrive at once", async () => {
    const videoId = await newVideo();
    const made = await Promise.all(
      Array.from({ length: OPEN_UPLOADS_PER_VIDEO * 3 }, () => createUpload(videoId, clip.length)),
    );
    const open: string[] = [];
    for (const { created, id } of made) {
      // A creation that newer ones pushed out before it was answered is refused as gone.
      expect([201, 404]).toContain(created.status);
      if (await t.cumulo.services.uploads.resumable.find(id)) open.push(id);
    }
    expect(open).toHaveLength(OPEN_UPLOADS_PER_VIDEO);
    const files = readdirSync(join(t.store.dataDir, "uploads"));
    expect(made.map(({ id }) => id).filter((id) => files.includes(id))).toEqual(open);
  });

  it("answers 404 and keeps nothing when the video is deleted between the route's check and the creation", async () => {
    const videoId = await newVideo();
    const { resumable } = t.cumulo.services.uploads;
    const bindingFor = resumable.bindingFor.bind(resumable);
    const spy = vi.spyOn(resumable, "bindingFor").mockImplementationOnce(async (...args) => {
      const binding = await bindingFor(...args);
      expect((await t.request("DELETE", videoPath(libraryId, videoId))).status).toBe(200);
      return binding;
    });
    try {
      const before = readdirSync(join(t.store.dataDir, "uploads"));
      const { created } = await createUpload(videoId, clip.length, clip.subarray(0, 100));
      expect(created.status).toBe(404);
      expect(await created.text()).toBe("The video no longer exists\n");
      expect(spy).toHaveBeenCalledTimes(1);
      expect(readdirSync(join(t.store.dataDir, "uploads"))).toEqual(before);
    } finally {
      spy.mockRestore();
    }
  });

  it("frees a deleted video's partial upload at the next housekeeping pass, not after the expiry", async () => {
    const videoId = await newVideo();
    const { id } = await createUpload(videoId, clip.length, clip.subarray(0, 500));
    const file = join(t.store.dataDir, "uploads", id);
    expect((await t.request("DELETE", videoPath(libraryId, videoId))).status).toBe(200);
    // The pass the housekeeper makes now: nothing has expired, but no record names the file any more.
    await t.cumulo.services.uploads.resumable.pruneCreatedBefore(
      new Date(Date.now() - t.config.uploads.expiryMs),
    );
    expect(existsSync(file)).toBe(false);
  });

  it("removes abandoned uploads in housekeeping once they expire", async () => {
    const { id } = await createUpload(await newVideo(), clip.length, clip.subarray(0, 500));
    const file = join(t.store.dataDir, "uploads", id);
    const { resumable } = t.cumulo.services.uploads;
    // Nothing is due yet; a pass after the expiry removes the record and the partial file.
    await resumable.pruneCreatedBefore(new Date(Date.now() - t.config.uploads.expiryMs));
    expect(existsSync(file)).toBe(true);
    await resumable.pruneCreatedBefore(new Date(Date.now() + 1000));
    expect(existsSync(file)).toBe(false);
    expect(await resumable.find(id)).toBeUndefined();
  });
});

// Each case starts two servers and waits for a transcode: several times the default 20 s on a loaded machine.
describe("resumable uploads across a server restart and across nodes", { timeout: 60_000 }, () => {
  let store: TestStore;
  let work: string;
  let clip: Buffer;

  beforeAll(async () => {
    store = await createMigratedTestStore();
    work = mkdtempSync(join(tmpdir(), "cumulo-tus-restart-"));
    clip = readFileSync(await generateClip(work, { seconds: 2, width: 320, height: 240 }));
  });
  afterAll(async () => {
    await store?.drop();
    rmSync(work, { recursive: true, force: true });
  });

  it("resumes an upload after the server restarts (same data dir and database, same address)", async () => {
    const env = { CUMULO_RATE_LIMIT: "100000/1m" };
    let t = await startTestApp(env, { store });
    const port = new URL(t.baseUrl).port;
    const endpoint = `${t.baseUrl}${TUS_PATH}`;
    try {
      const libraryId = (await createLibrary(t)).id;
      const videoId = (await createVideo(t, libraryId)).id;
      const options = {
        endpoint,
        chunkSize: 16 * 1024,
        headers: { authorization: `Bearer ${t.adminKey}` },
        metadata: { library_id: libraryId, video_id: videoId },
        // Where a real client keeps its upload URLs, so a new run finds the unfinished upload.
        urlStorage: new FileUrlStorage(join(work, "tus-urls.json")),
        retryDelays: [],
      };
      // First run: stop after three chunks, then the server goes away.
      await new Promise<void>((resolve, reject) => {
        let done = 0;
        const first: Upload = new Upload(clip, {
          ...options,
          onChunkComplete: () => {
            done += 1;
            if (done === 3) first.abort().then(resolve, reject);
          },
          onError: reject,
        });
        first.start();
      });
      await t.close();
      t = await startTestApp({ ...env, PORT: port }, { store });

      // Second run, as the client would after its own restart: find the upload and continue it.
      let resumedFrom = -1;
      await new Promise<void>((resolve, reject) => {
        const second: Upload = new Upload(clip, {
          ...options,
          onAfterResponse: (request, response) => {
            if (request.getMethod() === "HEAD") resumedFrom = Number(response.getHeader("Upload-Offset"));
          },
          onSuccess: () => resolve(),
          onError: reject,
        });
        second.findPreviousUploads().then((previous) => {
          expect(previous.length).toBe(1);
          second.resumeFromPreviousUpload(previous[0] as NonNullable<(typeof previous)[0]>);
          second.start();
        }, reject);
      });
      expect(resumedFrom).toBe(3 * 16 * 1024);
      expect(sha256(await storedSource(t, videoId))).toBe(sha256(clip));
      expect((await waitForStatus(t, libraryId, videoId, ["ready", "failed"])).status).toBe("ready");
    } finally {
      await t.close();
    }
  });

  it("continues on a second API node an upload started on the first", async () => {
    const env = { CUMULO_RATE_LIMIT: "100000/1m", CUMULO_ROLES: "api" };
    const a = await startTestApp(env, { store });
    const b = await startTestApp(env, { store });
    try {
      const libraryId = (await createLibrary(a)).id;
      const videoId = (await createVideo(a, libraryId)).id;
      const headers = { authorization: `Bearer ${a.adminKey}` };
      let uploadUrl = "";
      await new Promise<void>((resolve, reject) => {
        const first: Upload = new Upload(clip, {
          endpoint: `${a.baseUrl}${TUS_PATH}`,
          chunkSize: 16 * 1024,
          headers,
          metadata: { library_id: libraryId, video_id: videoId },
          retryDelays: [],
          onChunkComplete: () => {
            uploadUrl = first.url ?? "";
            first.abort().then(resolve, reject);
          },
          onError: reject,
        });
        first.start();
      });
      const onB = uploadUrl.replace(a.baseUrl, b.baseUrl);
      expect(onB).not.toBe(uploadUrl);
      await runUpload(clip, {
        uploadUrl: onB,
        endpoint: `${b.baseUrl}${TUS_PATH}`,
        chunkSize: 16 * 1024,
        headers,
      });
      const processing = await b.request("GET", `${videoPath(libraryId, videoId)}/processing`);
      expect(processing.body.data.source_bytes).toBe(clip.length);
      expect(sha256(await storedSource(b, videoId))).toBe(sha256(clip));
    } finally {
      await a.close();
      await b.close();
    }
  });

  // Two data dirs on one store: PostgreSQL only (a SQLite store lives in its data dir).
  it.runIf(testStoreKind() === "postgres")(
    "logs why an API node without an upload's bytes answers 410: the request should reach the node holding them",
    async () => {
      const env = { CUMULO_RATE_LIMIT: "100000/1m", CUMULO_ROLES: "api" };
      const log = capturingLogger("warn");
      const holder = await startTestApp(env, { store });
      const otherDir = mkdtempSync(join(tmpdir(), "cumulo-tus-other-node-"));
      const other = await startTestApp({ ...env, CUMULO_DATA_DIR: otherDir }, { store, logger: log.logger });
      try {
        const libraryId = (await createLibrary(holder)).id;
        const videoId = (await createVideo(holder, libraryId)).id;
        const metadata = [`library_id ${btoa(libraryId)}`, `video_id ${btoa(videoId)}`].join(",");
        const headers = { authorization: `Bearer ${holder.adminKey}`, "tus-resumable": "1.0.0" };
        const created = await fetch(`${holder.baseUrl}${TUS_PATH}`, {
          method: "POST",
          headers: { ...headers, "upload-length": String(clip.length), "upload-metadata": metadata },
        });
        expect(created.status).toBe(201);
        const path = created.headers.get("location") ?? "";
        expect((await fetch(`${other.baseUrl}${path}`, { method: "HEAD", headers })).status).toBe(410);
        const told = log.lines.filter((line) => line.uploadId !== undefined);
        expect(told.map((line) => [line.level, line.msg, line.uploadId])).toEqual([
          [
            40,
            "resumable upload's bytes are not on this API node's disk: with several API nodes, route /v1/media/tus/{id} to the node that holds them (docs/operations.md, Media storage); after a restore, unfinished uploads are not in backups; answered 410",
            path.split("/").pop(),
          ],
        ]);
        expect((await fetch(`${holder.baseUrl}${path}`, { method: "HEAD", headers })).status).toBe(200);
      } finally {
        await holder.close();
        await other.close();
        rmSync(otherDir, { recursive: true, force: true });
      }
    },
  );

  it("moves an upload stranded in an uploads folder two API nodes share once, whichever finds it", async () => {
    const env = { CUMULO_RATE_LIMIT: "100000/1m", CUMULO_ROLES: "api" };
    const a = await startTestApp(env, { store });
    const b = await startTestApp(env, { store });
    try {
      const libraryId = (await createLibrary(a)).id;
      const videoId = (await createVideo(a, libraryId)).id;
      const created = await fetch(`${a.baseUrl}${TUS_PATH}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${a.adminKey}`,
          "tus-resumable": "1.0.0",
          "upload-length": String(clip.length),
          "upload-metadata": `library_id ${btoa(libraryId)},video_id ${btoa(videoId)}`,
        },
      });
      expect(created.status).toBe(201);
      const id = (created.headers.get("location") ?? "").split("/").pop() ?? "";
      // Every byte arrived, and the node that took them died before moving them.
      writeFileSync(join(store.dataDir, "uploads", id), clip);
      const finished = await Promise.all(
        [a, b].map((node) => node.cumulo.services.uploads.resumable.finishStrandedUploads()),
      );
      // At most one of them (the nodes' own passes, every 10 s, may find it too).
      expect(finished[0] + finished[1]).toBeLessThanOrEqual(1);
      const processing = await a.cumulo.store.db
        .selectFrom("video_processing")
        .select("generation")
        .where("video_id", "=", videoId)
        .executeTakeFirstOrThrow();
      // One move, one source: a second would have replaced the first and been processed again.
      expect(processing.generation).toBe(1);
      expect(sha256(await storedSource(a, videoId))).toBe(sha256(clip));
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("removes an abandoned upload's partial file on the API node that holds it, with no worker role there", async () => {
    const env = { CUMULO_RATE_LIMIT: "100000/1m", CUMULO_ROLES: "api" };
    const clock = new OffsetClock();
    let api = await startTestApp(env, { store, clock });
    try {
      const libraryId = (await createLibrary(api)).id;
      const videoId = (await createVideo(api, libraryId)).id;
      const uploadUrl = await new Promise<string>((resolve, reject) => {
        const first: Upload = new Upload(clip, {
          endpoint: `${api.baseUrl}${TUS_PATH}`,
          chunkSize: 16 * 1024,
          headers: { authorization: `Bearer ${api.adminKey}` },
          metadata: { library_id: libraryId, video_id: videoId },
          retryDelays: [],
          onChunkComplete: () => {
            first.abort().then(() => resolve(first.url ?? ""), reject);
          },
          onError: reject,
        });
        first.start();
      });
      const file = join(store.dataDir, "uploads", uploadUrl.split("/").pop() ?? "");
      await waitUntil(() => existsSync(file));
      await api.close();
      // The node comes back after the upload has expired: housekeeping runs as it starts.
      clock.offsetMs = api.config.uploads.expiryMs + 60_000;
      api = await startTestApp(env, { store, clock });
      await waitUntil(() => !existsSync(file));
    } finally {
      await api.close();
    }
  });
});
