import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary, createVideo, fieldErrors } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { generateClip } from "../support/media.ts";
import { waitUntil } from "../support/wait.ts";
import { uploadSource, videoPath, waitForStatus } from "../video/support.ts";
import { createEndpoint, type Receiver, startReceiver } from "../webhooks/helpers.ts";
import { sha256, storedSource } from "./support.ts";

const MAX_VIDEO_BYTES = 4 * 1024 * 1024;
const STAGES = ["uploading", "processing", "transcoding", "packaging", "ready"];

/** A real local HTTP server answering each path with `routes[path]`; it records what it was asked. */
async function startOrigin(host: string, routes: Record<string, (res: ServerResponse) => void>) {
  const requests: string[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    requests.push(req.url ?? "/");
    const route = routes[req.url ?? "/"];
    if (route) route(res);
    else res.writeHead(404).end("not here");
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    url: `http://${host}:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("importing a video's source from a URL", () => {
  let t: TestApp;
  let work: string;
  let clip: Buffer;
  let libraryId: string;
  let receiver: Receiver;
  let origin: Awaited<ReturnType<typeof startOrigin>>;
  /** Another loopback address, not on the import allow-list: a stand-in for an internal service. */
  let internal: Awaited<ReturnType<typeof startOrigin>>;
  /** Lets `/late` answer; until then its request waits, as a slow origin's does. */
  let answerLate: () => void = () => undefined;
  /** Whether the connection of the last `/trickle` download was closed (by the importer). */
  let trickleClosed = false;
  const fetchSource = (videoId: string, url: unknown, key?: string) =>
    t.request("POST", `${videoPath(libraryId, videoId)}/source/fetch`, {
      json: { url },
      ...(key ? { key } : {}),
    });
  const importOf = (videoId: string) => t.request("GET", `${videoPath(libraryId, videoId)}/source/fetch`);
  const settled = (videoId: string) =>
    waitUntil(
      async () => {
        const state = (await importOf(videoId)).body.data;
        return ["stored", "failed"].includes(state.status) ? state : undefined;
      },
      20_000,
      "the import to settle",
    );
  const eventsOf = (videoId: string) =>
    receiver.received
      .map((entry) => JSON.parse(entry.body))
      .filter((body) => body.payload?.video_id === videoId);

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cumulo-import-"));
    receiver = await startReceiver();
    const file = await generateClip(work, { seconds: 2, width: 320, height: 240 });
    clip = readFileSync(file);
    internal = await startOrigin("127.0.0.2", { "/clip.mp4": (res) => res.end(clip) });
    origin = await startOrigin("127.0.0.1", {
      "/clip.mp4": (res) =>
        res.writeHead(200, { "content-type": "video/mp4", "content-length": String(clip.length) }).end(clip),
      "/moved": (res) => res.writeHead(302, { location: "/clip.mp4" }).end(),
      "/to-internal": (res) => res.writeHead(301, { location: `${internal.url}/clip.mp4` }).end(),
      "/to-file": (res) => res.writeHead(302, { location: "file:///etc/passwd" }).end(),
      "/big": (res) => res.writeHead(200, { "content-length": String(MAX_VIDEO_BYTES + 1) }).end(),
      "/big-chunked": (res) => {
        res.writeHead(200, { "content-type": "video/mp4" });
        res.end(Buffer.alloc(MAX_VIDEO_BYTES + 1024));
      },
      "/late": (res) => {
        new Promise<void>((resolve) => {
          answerLate = resolve;
        }).then(() => res.writeHead(200, { "content-type": "video/mp4" }).end(clip));
      },
      "/page": (res) => res.writeHead(200, { "content-type": "text/html" }).end("<html>not a video</html>"),
      // 100 bytes every 50 ms, never ending: a long download in progress.
      "/trickle": (res) => {
        trickleClosed = false;
        res.writeHead(200, { "content-type": "video/mp4" });
        const timer = setInterval(() => res.write(Buffer.alloc(100)), 50);
        res.on("close", () => {
          clearInterval(timer);
          trickleClosed = true;
        });
      },
    });
    t = await startTestApp({
      CUMULO_RATE_LIMIT: "100000/1m",
      CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
      CUMULO_MAX_VIDEO_BYTES: String(MAX_VIDEO_BYTES),
      // Only the test's origin may be reached although it is not public; every other private address stays refused.
      CUMULO_IMPORT_ALLOW_ADDRESSES: "127.0.0.1",
    });
    libraryId = (await createLibrary(t)).id;
    await createEndpoint(t, libraryId, { url: `${receiver.url}/hook` });
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    await origin?.close();
    await internal?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("downloads through a redirect and the video reaches ready with its events", async () => {
    const videoId = (await createVideo(t, libraryId)).id;
    const accepted = await fetchSource(videoId, `${origin.url}/moved`);
    expect(accepted.status, accepted.text).toBe(202);
    expect(accepted.body).toMatchObject({
      success: true,
      data: { video_id: videoId, url: `${origin.url}/moved`, status: "queued", bytes_received: 0 },
    });
    const state = await settled(videoId);
    expect(state).toMatchObject({
      status: "stored",
      bytes_received: clip.length,
      content_length: clip.length,
    });
    expect(sha256(await storedSource(t, videoId))).toBe(sha256(clip));
    expect((await waitForStatus(t, libraryId, videoId, ["ready", "failed"])).status).toBe("ready");
    const events = await waitUntil(() => {
      const mine = eventsOf(videoId);
      return mine.some((body) => body.event === "ready") ? mine : undefined;
    });
    expect(events.map((body) => body.event)).toEqual(["created", ...STAGES]);
  });

  it("refuses a redirect to a private address that is not allowed, without connecting to it", async () => {
    const videoId = (await createVideo(t, libraryId)).id;
    expect((await fetchSource(videoId, `${origin.url}/to-internal`)).status).toBe(202);
    const state = await settled(videoId);
    expect(state.status).toBe("failed");
    expect(state.failure_reason).toMatch(/127\.0\.0\.2/);
    expect(internal.requests).toEqual([]);
    // A video without a source is failed, with its event; the reason is on the import.
    expect((await t.request("GET", videoPath(libraryId, videoId))).body.data.status).toBe("failed");
    await waitUntil(() => (eventsOf(videoId).some((body) => body.event === "failed") ? true : undefined));
  });

  it("fails imports the URL cannot satisfy, with the reason", async () => {
    const cases: [string, RegExp][] = [
      ["/nothing", /404/],
      ["/to-file", /file:/],
      ["/big", /larger than/],
      ["/big-chunked", /larger than/],
    ];
    for (const [path, reason] of cases) {
      const videoId = (await createVideo(t, libraryId)).id;
      expect((await fetchSource(videoId, `${origin.url}${path}`)).status).toBe(202);
      const state = await settled(videoId);
      expect(state.status, path).toBe("failed");
      expect(state.failure_reason, path).toMatch(reason);
    }
  });

  it("hands what arrives to the content check of processing: a web page fails there", async () => {
    const videoId = (await createVideo(t, libraryId)).id;
    expect((await fetchSource(videoId, `${origin.url}/page`)).status).toBe(202);
    expect((await settled(videoId)).status).toBe("stored");
    expect((await waitForStatus(t, libraryId, videoId, ["ready", "failed"])).status).toBe("failed");
    const processing = await t.request("GET", `${videoPath(libraryId, videoId)}/processing`);
    expect(processing.body.data.failure_reason).toBeTruthy();
  });

  it("does not replace a source uploaded after the import was requested", async () => {
    const videoId = (await createVideo(t, libraryId)).id;
    expect((await fetchSource(videoId, `${origin.url}/late`)).status).toBe(202);
    await waitUntil(() => (origin.requests.includes("/late") ? true : undefined));
    // The customer uploads the file itself while the import still waits for its origin.
    expect((await uploadSource(t, libraryId, videoId, clip)).status).toBe(202);
    answerLate();
    const state = await settled(videoId);
    expect(state.status).toBe("failed");
    expect(state.failure_reason).toMatch(/newer source/);
    // The upload stays the source: one generation, one `uploading` event, the video not failed.
    const processing = await t.request("GET", `${videoPath(libraryId, videoId)}/processing`);
    expect(processing.body.data.uploads).toBe(1);
    expect((await waitForStatus(t, libraryId, videoId, ["ready", "failed"])).status).toBe("ready");
    await waitUntil(() => (eventsOf(videoId).some((body) => body.event === "ready") ? true : undefined));
    expect(eventsOf(videoId).filter((body) => body.event === "uploading")).toHaveLength(1);
  });

  it("stops an import's download once the video gets a newer source, keeping what it received", async () => {
    const videoId = (await createVideo(t, libraryId)).id;
    expect((await fetchSource(videoId, `${origin.url}/trickle`)).status).toBe(202);
    await waitUntil(
      async () => ((await importOf(videoId)).body.data.bytes_received > 0 ? true : undefined),
      20_000,
      "the first progress report",
    );
    expect((await uploadSource(t, libraryId, videoId, clip)).status).toBe(202);
    // Without the stop, the download of a never-ending file runs until the import's time limit.
    const state = await settled(videoId);
    expect(state.failure_reason).toMatch(/newer source/);
    await waitUntil(() => (trickleClosed ? true : undefined));
    expect(state.bytes_received).toBeGreaterThan(0);
    expect(state.bytes_received % 100).toBe(0);
    expect((await waitForStatus(t, libraryId, videoId, ["ready", "failed"])).status).toBe("ready");
  });

  it("validates the URL at once and keeps imports to the caller's organization", async () => {
    const videoId = (await createVideo(t, libraryId)).id;
    for (const url of [
      "ftp://example.com/a.mp4",
      "not a url",
      "http://10.0.0.1/a.mp4",
      "http://[::1]/a.mp4",
      // Read the WHATWG way it was an http URL (a webhook's URL with a leading space is refused).
      " http://files.example.com/a.mp4",
      42,
    ]) {
      const refused = await fetchSource(videoId, url);
      expect(refused.status, String(url)).toBe(400);
      expect(fieldErrors(refused.body)).toEqual({ url: expect.stringMatching(/^validation_/) });
    }
    // A length is validation_max, as a webhook URL's (it was validation_format).
    const long = await fetchSource(videoId, `https://example.com/${"a".repeat(2100)}`);
    expect(fieldErrors(long.body)).toEqual({ url: "validation_max" });
    // The document says so, as it does of a webhook's URL (QA of 4 December, session 41).
    const document = (await t.request("GET", "/openapi.json", { anonymous: true })).body;
    const body =
      document.paths["/v1/media/libraries/{libraryId}/videos/{videoId}/source/fetch"].post.requestBody;
    expect(body.content["application/json"].schema.properties.url).toMatchObject({
      maxLength: 2048,
      pattern: expect.stringMatching(/^\^/),
    });
    const missing = await t.request("POST", `${videoPath(libraryId, videoId)}/source/fetch`, { json: {} });
    expect(fieldErrors(missing.body)).toEqual({ url: "validation_required" });
    expect((await importOf(videoId)).status).toBe(404);

    const other = await t.createOrganization();
    expect((await fetchSource(videoId, `${origin.url}/clip.mp4`, other.key)).status).toBe(404);
    expect((await fetchSource(videoId, `${origin.url}/clip.mp4`)).status).toBe(202);
    const theirs = await t.request("GET", `${videoPath(libraryId, videoId)}/source/fetch`, {
      key: other.key,
    });
    expect(theirs.status).toBe(404);
    await settled(videoId);
    await waitForStatus(t, libraryId, videoId, ["ready", "failed"]);
  });
});

describe("URL imports from a slow origin", () => {
  let t: TestApp;
  let origin: Awaited<ReturnType<typeof startOrigin>>;

  beforeAll(async () => {
    origin = await startOrigin("127.0.0.1", {
      // A byte every 100 ms, never ending: each wait is short, the whole download never done.
      "/trickle": (res) => {
        res.writeHead(200, { "content-type": "video/mp4" });
        const timer = setInterval(() => res.write("x"), 100);
        res.on("close", () => clearInterval(timer));
      },
    });
    t = await startTestApp({ CUMULO_IMPORT_ALLOW_ADDRESSES: "127.0.0.1", CUMULO_IMPORT_TIMEOUT_S: "1" });
  });
  afterAll(async () => {
    await t?.close();
    await origin?.close();
  });

  it("ends an import that outlasts CUMULO_IMPORT_TIMEOUT_S at once, without downloading it again", async () => {
    const libraryId = (await createLibrary(t)).id;
    const videoId = (await createVideo(t, libraryId)).id;
    const path = `${videoPath(libraryId, videoId)}/source/fetch`;
    expect((await t.request("POST", path, { json: { url: `${origin.url}/trickle` } })).status).toBe(202);
    const state = await waitUntil(async () => {
      const current = (await t.request("GET", path)).body.data;
      return current.status === "failed" ? current : undefined;
    });
    expect(state.failure_reason).toMatch(/longer than 1 s/);
    // What arrived within the second, not the last progress report's (none is written before 1 s).
    expect(state.bytes_received).toBeGreaterThan(0);
    expect(origin.requests).toEqual(["/trickle"]);
  });
});

describe("URL imports with the default settings", () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it("refuses every private address, loopback included", async () => {
    const libraryId = (await createLibrary(t)).id;
    const videoId = (await createVideo(t, libraryId)).id;
    for (const url of [
      "http://127.0.0.1:9/a.mp4",
      "http://169.254.169.254/latest",
      "http://localhost/a.mp4",
    ]) {
      const refused = await t.request("POST", `${videoPath(libraryId, videoId)}/source/fetch`, {
        json: { url },
      });
      expect(refused.status, url).toBe(400);
      expect(fieldErrors(refused.body)).toEqual({ url: "validation_format" });
    }
  });
});
