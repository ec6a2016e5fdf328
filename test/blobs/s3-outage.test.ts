import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REMOVE_FILES_JOB } from "../../src/blobs/removals.ts";
import { OffsetClock } from "../../src/clock.ts";
import { edgeRequest, edgeUrlOf } from "../cdn/support.ts";
import { capturingLogger } from "../fuzz/log-capture.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { generateClip } from "../support/media.ts";
import { startS3Node, startTestS3, type TestS3 } from "../support/s3.ts";
import { createMigratedTestStore, type TestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import { TUS_PATH } from "../uploads/support.ts";
import { uploadSource, videoPath, waitForStatus } from "../video/support.ts";

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

/** Uploads the video's poster (it must be accepted) and asks the edge for it. */
async function posterServed(app: TestApp, libraryId: string, videoId: string) {
  const thumbnail = await app.request("POST", `${videoPath(libraryId, videoId)}/thumbnails`, {
    body: thumbnailForm(),
  });
  expect(thumbnail.status, thumbnail.text).toBe(200);
  return edgeRequest(edgeUrlOf(app), `/${libraryId}.media.cumulo.local/${videoId}/thumbnail.jpg`);
}

/**
 * One S3 server for every describe below that cuts its nodes off with a relay of its own (the first
 * stops its server, so it has one of its own): a server takes seconds to start. Their objects stay
 * apart by library and video ids.
 */
let sharedS3: Promise<TestS3> | undefined;
const startSharedS3 = () => {
  sharedS3 ??= startTestS3();
  return sharedS3;
};
afterAll(async () => {
  await (await sharedS3)?.close();
});

/** Nodes cut off from their bucket look for it again this often (CUMULO_STORAGE_RECHECK_MS; 10 s by default). */
const RECHECK = { CUMULO_STORAGE_RECHECK_MS: "500" };

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
    expect((await posterServed(app, libraryId, videoId)).status).toBe(200);
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
    expectUnavailable(patched.status, patched.headers.get("retry-after"));
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

/** A TCP relay to `target` that can be cut: while off, its connections are dropped and new ones refused. */
async function startSwitchableRelay(target: string) {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  let on = true;
  const server = createServer((client) => {
    if (!on) return client.destroy();
    const upstream = connect(Number(port), hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket)).on("error", () => undefined);
    }
    client.pipe(upstream).pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${address.port}`,
    off() {
      on = false;
      for (const socket of sockets) socket.destroy();
    },
    on() {
      on = true;
    },
    /** Closes it and its connections: a pooled one to the S3 server would hold it open for seconds. */
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** One api+worker node that reaches the shared test S3 only through a switchable relay of its own. */
async function nodeBehindRelay(
  env: Record<string, string> = {},
  options: Parameters<typeof startTestApp>[1] = {},
) {
  const s3 = await startSharedS3();
  const relay = await startSwitchableRelay(s3.settings.endpoint ?? "");
  const app = await startTestApp(
    {
      ...s3.env,
      CUMULO_S3_ENDPOINT: relay.url,
      CUMULO_S3_TIMEOUT_MS: "2000",
      CUMULO_ROLES: "api,worker",
      CUMULO_RATE_LIMIT: "100000/1m",
      ...RECHECK,
      ...env,
    },
    options,
  );
  return { s3, relay, app };
}

/**
 * A worker whose bucket is away while it processes a video: the job waits for the bucket instead
 * of spending its three attempts in seconds and failing the video for good.
 */
describe("a video processed while the worker's bucket is away", { timeout: 120_000 }, () => {
  let s3: TestS3;
  let store: TestStore;
  let relay: Awaited<ReturnType<typeof startSwitchableRelay>>;
  let api: TestApp;
  let worker: TestApp;
  let work: string;
  const dataDirs: string[] = [];
  const workerLog = capturingLogger("warn");

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cumulo-s3-outage-"));
    [s3, store] = await Promise.all([startSharedS3(), createMigratedTestStore()]);
    relay = await startSwitchableRelay(s3.settings.endpoint ?? "");
    // Imports come from a server of the test's own, on a loopback address.
    api = await startS3Node({
      s3,
      store,
      roles: "api",
      env: { CUMULO_RATE_LIMIT: "100000/1m", CUMULO_IMPORT_ALLOW_PRIVATE: "true" },
      dataDirs,
    });
    // The worker reaches the bucket through the relay only, so it alone loses it.
    worker = await startS3Node({
      s3,
      store,
      roles: "worker",
      env: {
        CUMULO_S3_ENDPOINT: relay.url,
        CUMULO_S3_TIMEOUT_MS: "2000",
        CUMULO_IMPORT_ALLOW_PRIVATE: "true",
      },
      dataDirs,
      start: { logger: workerLog.logger },
    });
  }, 60_000);

  afterAll(async () => {
    for (const app of [worker, api]) await app?.close();
    await relay?.close();
    await store?.drop();
    for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  });

  it("keeps processing and URL-import jobs waiting without spending attempts, and finishes both once the bucket is back", async () => {
    const clip = readFileSync(await generateClip(work, { seconds: 1, width: 160, height: 120 }));
    const origin = createHttpServer((_request, response) => response.writeHead(200).end(clip));
    await new Promise<void>((resolve) => origin.listen(0, "127.0.0.1", resolve));
    try {
      const libraryId = (await createLibrary(api, { name: "patient" })).id;
      const uploaded = (await createVideo(api, libraryId, { title: "uploaded during an outage" })).id;
      const imported = (await createVideo(api, libraryId, { title: "imported during an outage" })).id;
      relay.off();
      expect((await uploadSource(api, libraryId, uploaded, clip)).status).toBe(202);
      const url = `http://127.0.0.1:${(origin.address() as AddressInfo).port}/clip.mp4`;
      const fetching = await api.request("POST", `${videoPath(libraryId, imported)}/source/fetch`, {
        json: { url },
      });
      expect(fetching.status, fetching.text).toBe(202);
      // The payload is text on SQLite and jsonb on PostgreSQL: matched here.
      const jobOf = async (videoId: string) =>
        (
          await worker.cumulo.store.db
            .selectFrom("jobs")
            .select(["id", "status", "attempts", "max_attempts", "last_error", "payload"])
            .execute()
        ).find((job) => JSON.stringify(job.payload).includes(videoId));
      for (const videoId of [uploaded, imported]) {
        await waitUntil(
          async () => (await jobOf(videoId))?.last_error === "media storage unavailable",
          30_000,
          "the job postponed",
        );
      }
      // Each job run as often as its attempts allow (ordinary failures would have failed it by then,
      // 1 s and then 2 s apart), each run postponed.
      const postponed = (jobId: string) =>
        workerLog.lines.filter(
          (line) => line.msg === "job postponed: something it needs is unavailable" && line.jobId === jobId,
        ).length;
      for (const videoId of [uploaded, imported]) {
        await waitUntil(
          async () => {
            const job = await jobOf(videoId);
            return job && (job.status === "failed" || postponed(job.id) >= job.max_attempts);
          },
          30_000,
          "the job run as often as its attempts allow",
        );
      }
      for (const videoId of [uploaded, imported]) {
        const waiting = await jobOf(videoId);
        expect(waiting?.status).not.toBe("failed");
        expect(waiting?.attempts).toBeLessThanOrEqual(1);
        expect((await api.request("GET", videoPath(libraryId, videoId))).body.data.status).not.toBe("failed");
      }
      expect(
        (await api.request("GET", `${videoPath(libraryId, imported)}/source/fetch`)).body.data.status,
      ).not.toBe("failed");

      relay.on();
      for (const videoId of [uploaded, imported]) {
        expect((await waitForStatus(api, libraryId, videoId, ["ready", "failed"], 60_000)).status).toBe(
          "ready",
        );
      }
    } finally {
      origin.close();
    }
  });
});

/**
 * A tus upload whose last PATCH was answered 503 because the bucket was away keeps its bytes; it
 * was finished only by the client's next HEAD, and a client that gave up left its video waiting
 * for ever. The node finishes it by itself once the bucket is back.
 */
describe("a resumable upload whose last bytes arrived while the bucket was away", {
  timeout: 120_000,
}, () => {
  let relay: Awaited<ReturnType<typeof startSwitchableRelay>>;
  let app: TestApp;
  let work: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cumulo-s3-stranded-"));
    ({ relay, app } = await nodeBehindRelay({ CUMULO_EDGE_PORT: "off" }));
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    await relay?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("is moved into the bucket and processed once the bucket answers, without a HEAD from its client", async () => {
    const clip = readFileSync(await generateClip(work, { seconds: 1, width: 160, height: 120 }));
    const libraryId = (await createLibrary(app, { name: "stranded" })).id;
    const videoId = (await createVideo(app, libraryId, { title: "its client gave up" })).id;
    const authorized = await app.request("POST", `${videoPath(libraryId, videoId)}/upload-authorization`, {
      json: {},
    });
    expect(authorized.status, authorized.text).toBe(201);
    const headers = { ...authorized.body.data.headers, "tus-resumable": "1.0.0" };
    const created = await fetch(`${app.baseUrl}${TUS_PATH}`, {
      method: "POST",
      headers: { ...headers, "upload-length": String(clip.length) },
    });
    expect(created.status).toBe(201);
    const upload = new URL(created.headers.get("location") ?? "", `${app.baseUrl}${TUS_PATH}/`).href;

    relay.off();
    const patched = await fetch(upload, {
      method: "PATCH",
      headers: { ...headers, "upload-offset": "0", "content-type": "application/offset+octet-stream" },
      body: clip,
    });
    expect(patched.status).toBe(503);
    expect((await app.request("GET", videoPath(libraryId, videoId))).body.data.status).toBe("created");

    relay.on();
    const processed = await waitForStatus(app, libraryId, videoId, ["ready", "failed"], 60_000);
    expect(processed.status).toBe("ready");
    const uploadId = upload.split("/").pop() ?? "";
    const record = await app.cumulo.store.db
      .selectFrom("video_uploads")
      .select("completed_at")
      .where("id", "=", uploadId)
      .executeTakeFirst();
    expect(record?.completed_at).not.toBeNull();
    expect(existsSync(join(app.config.dataDir, "uploads", uploadId))).toBe(false);
  });
});

/**
 * A node started while its bucket is away (its S3 service starting at the same time, or not yet back
 * from a power cut): it starts, serves what needs no files and answers 503 for the rest, and works
 * fully once the bucket answers. Settings the bucket refuses still stop it. It refused to start.
 */
describe("a node started while its bucket is away", { timeout: 120_000 }, () => {
  let s3: TestS3;
  let store: TestStore;
  let relay: Awaited<ReturnType<typeof startSwitchableRelay>>;

  beforeAll(async () => {
    [s3, store] = await Promise.all([startSharedS3(), createMigratedTestStore()]);
    relay = await startSwitchableRelay(s3.settings.endpoint ?? "");
  }, 60_000);

  afterAll(async () => {
    await relay?.close();
    await store?.drop();
  });

  it("starts, answers 503 for files only, and works fully once the bucket is back", async () => {
    const log = capturingLogger("info");
    relay.off();
    const app = await startTestApp(
      {
        ...s3.env,
        CUMULO_S3_ENDPOINT: relay.url,
        CUMULO_S3_TIMEOUT_MS: "2000",
        CUMULO_ROLES: "api,edge",
        CUMULO_EDGE_PORT: "0",
        ...RECHECK,
      },
      { logger: log.logger },
    );
    try {
      const said = (msg: string) => log.lines.some((line) => line.msg === msg);
      expect(said("media storage unavailable at start; starting without it")).toBe(true);
      const libraryId = (await createLibrary(app, { name: "early", default_privacy: "public" })).id;
      const videoId = (await createVideo(app, libraryId, { title: "before its bucket" })).id;
      expect((await app.request("GET", videoPath(libraryId, videoId))).status).toBe(200);
      const early = await app.request("POST", `${videoPath(libraryId, videoId)}/thumbnails`, {
        body: thumbnailForm(),
      });
      expect(early.status).toBe(503);
      expect(early.headers.get("retry-after")).toBe("10");

      relay.on();
      await waitUntil(() => said("media storage available again"), 30_000, "the bucket seen back");
      const served = await posterServed(app, libraryId, videoId);
      expect(served.status).toBe(200);
      expect(served.body).toEqual(PNG);
    } finally {
      relay.on();
      await app.close();
    }
  });

  it("starts on a bucket whose service answers 5xx", async () => {
    const failing = createHttpServer((_request, response) => response.writeHead(503).end());
    await new Promise<void>((resolve) => failing.listen(0, "127.0.0.1", resolve));
    try {
      const endpoint = `http://127.0.0.1:${(failing.address() as AddressInfo).port}`;
      const app = await startTestApp(
        { ...s3.env, CUMULO_S3_ENDPOINT: endpoint, CUMULO_ROLES: "api" },
        { store },
      );
      await app.close();
    } finally {
      failing.close();
    }
  });

  it("starts on an endpoint whose host name does not resolve, as in an outage", async () => {
    // A resolver restarting or a container network coming up: the node refused to start.
    const log = capturingLogger("warn");
    const app = await startTestApp(
      {
        ...s3.env,
        CUMULO_S3_ENDPOINT: "http://cumulo-no-such-host.invalid:9000",
        CUMULO_S3_TIMEOUT_MS: "2000",
        CUMULO_ROLES: "api",
        ...RECHECK,
      },
      { store, logger: log.logger },
    );
    try {
      const warning = log.lines.find(
        (line) => line.msg === "media storage unavailable at start; starting without it",
      );
      // The warning names the host, so a misspelt endpoint is found in the log.
      expect(JSON.stringify(warning)).toContain("ENOTFOUND cumulo-no-such-host.invalid");
      expect((await app.request("GET", "/readyz")).status).toBe(200);
      const libraryId = (await createLibrary(app, { name: "unresolved" })).id;
      const videoId = (await createVideo(app, libraryId)).id;
      const refused = await app.request("POST", `${videoPath(libraryId, videoId)}/thumbnails`, {
        body: thumbnailForm(),
      });
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("10");
      expect(refused.body).toEqual({
        success: false,
        error: "service_unavailable",
        message: "Media storage is unavailable; try again shortly",
      });
    } finally {
      await app.close();
    }
  });

  it("still refuses to start with credentials or a bucket the service refuses", async () => {
    const refused: Record<string, string>[] = [
      { CUMULO_S3_ACCESS_KEY_ID: "WRONG" },
      { CUMULO_S3_BUCKET: "missing-bucket" },
    ];
    for (const env of refused) {
      const started = startTestApp({ ...s3.env, ...env, CUMULO_ROLES: "api" }, { store });
      await expect(started).rejects.toThrow(
        /^cannot reach S3 bucket "[a-z-]+" \(CUMULO_S3_\*\): .*HTTP 40[34]/,
      );
    }
  });
});

/**
 * Items deleted while the bucket is away: the deletion is answered as done, and their files go once
 * the bucket answers again, with no further request. They stayed in the bucket for ever.
 */
describe("files of items deleted while the bucket is away", { timeout: 120_000 }, () => {
  let s3: TestS3;
  let relay: Awaited<ReturnType<typeof startSwitchableRelay>>;
  let app: TestApp;

  beforeAll(async () => {
    ({ s3, relay, app } = await nodeBehindRelay());
  }, 60_000);

  afterAll(async () => {
    relay?.on();
    await app?.close();
    await relay?.close();
  });

  const videoWithFiles = async (libraryId: string) => {
    const videoId = (await createVideo(app, libraryId)).id;
    const thumbnail = await app.request("POST", `${videoPath(libraryId, videoId)}/thumbnails`, {
      body: thumbnailForm(),
    });
    expect(thumbnail.status, thumbnail.text).toBe(200);
    const subtitle = new FormData();
    subtitle.set("file", new Blob(["WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nhello\n"]), "en.vtt");
    subtitle.set("title", "English");
    subtitle.set("language", "en");
    const added = await app.request("POST", `${videoPath(libraryId, videoId)}/subtitles`, { body: subtitle });
    expect(added.status, added.text).toBe(201);
    return videoId;
  };

  it("never queues a removal wider than one library", async () => {
    const { removals } = app.cumulo.services.media.deps;
    for (const files of [{ prefixes: ["media"] }, { keys: ["uploads/x"] }, { prefixes: ["media/../x"] }]) {
      await expect(
        app.cumulo.store.db.transaction().execute((trx) => removals.queue(trx, files)),
      ).rejects.toThrow(/blob key/);
    }
  });

  it("removes them once the bucket is back", async () => {
    const kept = (await createLibrary(app, { name: "kept" })).id;
    const deletedLibrary = (await createLibrary(app, { name: "deleted" })).id;
    const deletedVideo = await videoWithFiles(kept);
    const keptVideo = await videoWithFiles(kept);
    await videoWithFiles(deletedLibrary);
    const under = (prefix: string) => s3.keys().filter((key) => key.startsWith(`${prefix}/`));
    expect(under(`media/${kept}/${deletedVideo}`)).toHaveLength(2);
    expect(under(`media/${deletedLibrary}`)).toHaveLength(2);

    relay.off();
    expect((await app.request("DELETE", videoPath(kept, deletedVideo))).status).toBe(200);
    expect((await app.request("DELETE", `/v1/media/libraries/${deletedLibrary}`)).status).toBe(200);
    expect(under(`media/${kept}/${deletedVideo}`)).toHaveLength(2);
    expect(under(`media/${deletedLibrary}`)).toHaveLength(2);

    relay.on();
    await waitUntil(
      () => under(`media/${kept}/${deletedVideo}`).length + under(`media/${deletedLibrary}`).length === 0,
      60_000,
      "the deleted items' objects removed",
    );
    expect(under(`media/${kept}/${keptVideo}`)).toHaveLength(2);
  });
});

/** A deletion is not given up because the bucket stayed away for longer than other jobs wait. */
describe("removals waiting for a bucket away for more than a day", { timeout: 60_000 }, () => {
  it("keeps waiting without spending attempts", async () => {
    const clock = new OffsetClock();
    const { s3, relay, app } = await nodeBehindRelay({}, { clock });
    try {
      const libraryId = (await createLibrary(app)).id;
      const videoId = (await createVideo(app, libraryId)).id;
      const thumbnail = await app.request("POST", `${videoPath(libraryId, videoId)}/thumbnails`, {
        body: thumbnailForm(),
      });
      expect(thumbnail.status, thumbnail.text).toBe(200);
      relay.off();
      expect((await app.request("DELETE", videoPath(libraryId, videoId))).status).toBe(200);
      const removal = () =>
        app.cumulo.store.db
          .selectFrom("jobs")
          .select(["status", "attempts", "updated_at", "run_at"])
          .where("kind", "=", REMOVE_FILES_JOB)
          .executeTakeFirst();
      // The worker's first try, at once, ends before the clock moves: a day's jump under a running
      // try is a lease run out, and a run whose job is claimed again keeps its attempt spent.
      await waitUntil(
        async () => {
          const job = await removal();
          return job?.status === "pending" && job.run_at > clock.now().toISOString() ? job : undefined;
        },
        30_000,
        "the removal put off by the worker's first try",
      );
      clock.offsetMs = 25 * 3600 * 1000;
      const movedAt = clock.now().toISOString();
      // Run by the worker at the moved time, and failed for the bucket's absence.
      const tried = await waitUntil(
        async () => {
          const job = await removal();
          return job && job.updated_at > movedAt && job.status !== "running" ? job : undefined;
        },
        30_000,
        "the removal tried a day later",
      );
      expect(tried).toMatchObject({ status: "pending", attempts: 0 });
      relay.on();
      // Tried again a minute later: the longest a waiting job is put off.
      clock.offsetMs += 60_000;
      await waitUntil(async () => (await removal())?.status === "done", 30_000, "the removal done");
      expect(s3.keys().filter((key) => key.startsWith(`media/${libraryId}/`))).toEqual([]);
    } finally {
      relay.on();
      await app.close();
      await relay.close();
    }
  });
});
