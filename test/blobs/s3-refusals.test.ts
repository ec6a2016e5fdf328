import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { S3BlobStore } from "../../src/blobs/s3.ts";
import { BlobStoreRefusedError, BlobStoreUnavailableError } from "../../src/blobs/store.ts";
import { OffsetClock } from "../../src/clock.ts";
import { capturingLogger } from "../fuzz/log-capture.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { type S3Relay, startS3Relay, startTestS3, type TestS3 } from "../support/s3.ts";
import { waitUntil } from "../support/wait.ts";
import { uploadSource, videoPath } from "../video/support.ts";
import { removalJobs } from "./support.ts";

// 1x1 PNG
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);

const thumbnailForm = (content: Buffer) => {
  const data = new FormData();
  data.set("file", new Blob([content]), "poster.png");
  return data;
};

const subtitleForm = (title: string) => {
  const data = new FormData();
  data.set("file", new Blob(["WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nhello\n"]), "en.vtt");
  data.set("title", title);
  data.set("language", "en");
  return data;
};

/** One test S3, and one api+worker node that reaches it through a relay that can refuse or fail requests. */
let s3: TestS3;
let relay: S3Relay;
let app: TestApp;
const clock = new OffsetClock();
const log = capturingLogger("warn");

beforeAll(async () => {
  s3 = await startTestS3();
  relay = await startS3Relay(s3.settings.endpoint ?? "");
  app = await startTestApp(
    {
      ...s3.env,
      CUMULO_S3_ENDPOINT: relay.url,
      CUMULO_S3_TIMEOUT_MS: "2000",
      CUMULO_ROLES: "api,worker",
      CUMULO_RATE_LIMIT: "100000/1m",
    },
    { clock, logger: log.logger },
  );
}, 60_000);

afterAll(async () => {
  await app?.close();
  await relay?.close();
  await s3?.close();
});

const under = (prefix: string) => s3.keys().filter((key) => key.startsWith(`${prefix}/`));

/**
 * Waits for `check`, moving time on by 10 s whenever no removal is running and waking the worker:
 * its retries (1 to 8 s apart, or 2 s and more for a store that is away) run at once instead of
 * being waited for.
 */
const waitMovingTime = <T>(check: () => Promise<T | undefined>, what: string) =>
  waitUntil(
    async () => {
      const value = await check();
      if (value !== undefined) return value;
      if (!(await removalJobs(app)).some((job) => job.status === "running")) {
        clock.offsetMs += 10_000;
        app.cumulo.services.jobs.notify();
      }
      return undefined;
    },
    20_000,
    what,
  );

/**
 * An upload refused after its file was stored (content that is not what its name says, an empty
 * source, a form field no store can hold): the file was deleted directly, and a bucket failing at
 * that moment kept it for ever (and turned the refusal into a 503). Its removal is now a job.
 */
describe("files of uploads refused while the bucket fails deletes", { timeout: 60_000 }, () => {
  it("answers the refusal and removes the files once the bucket takes deletes again", async () => {
    const libraryId = (await createLibrary(app, { name: "refused uploads" })).id;
    const videoId = (await createVideo(app, libraryId)).id;
    const path = videoPath(libraryId, videoId);
    relay.answers.deletes = "unavailable";
    try {
      const notAnImage = await app.request("POST", `${path}/thumbnails`, {
        body: thumbnailForm(Buffer.from("not an image")),
      });
      expect(notAnImage.status, notAnImage.text).toBe(400);
      expect(notAnImage.body.errors[0].code).toBe("validation_mimes");
      const empty = await uploadSource(app, libraryId, videoId, new Uint8Array(0));
      expect(empty.status, empty.text).toBe(400);
      const unstorable = await app.request("POST", `${path}/subtitles`, { body: subtitleForm("a\u0000b") });
      expect(unstorable.status, unstorable.text).toBe(400);
      expect(under(`media/${libraryId}/${videoId}`)).toHaveLength(3);
      expect((await removalJobs(app)).filter((job) => job.status !== "done")).toHaveLength(3);
    } finally {
      relay.answers.deletes = "relayed";
    }
    await waitMovingTime(async () => {
      const done = (await removalJobs(app)).every((job) => job.status === "done");
      return done && under(`media/${libraryId}/${videoId}`).length === 0 ? true : undefined;
    }, "the refused uploads' files removed");
  });
});

/**
 * A bucket that refuses deletes (a policy without `s3:DeleteObject`, a bucket gone) refuses them for
 * ever: its removal jobs waited without limit, as through an outage. They now spend their attempts
 * and fail, logged as an error, and the failed job keeps what was not removed.
 */
describe("removals a bucket refuses", { timeout: 60_000 }, () => {
  it("fail after their attempts, logged as an error", async () => {
    const libraryId = (await createLibrary(app, { name: "refusing bucket" })).id;
    const videoId = (await createVideo(app, libraryId)).id;
    const path = videoPath(libraryId, videoId);
    expect((await app.request("POST", `${path}/thumbnails`, { body: thumbnailForm(PNG) })).status).toBe(200);
    const subtitle = await app.request("POST", `${path}/subtitles`, { body: subtitleForm("English") });
    expect(subtitle.status, subtitle.text).toBe(201);
    const before = new Set((await removalJobs(app)).map((job) => job.id));
    const queued = () => removalJobs(app).then((jobs) => jobs.filter((job) => !before.has(job.id)));

    relay.answers.deletes = "access_denied";
    try {
      // One removal by key (DeleteObject: 403), one by prefix (DeleteObjects: AccessDenied per key).
      expect((await app.request("DELETE", `${path}/subtitles/${subtitle.body.data.id}`)).status).toBe(200);
      expect((await app.request("DELETE", path)).status).toBe(200);
      const failed = await waitMovingTime(async () => {
        const jobs = await queued();
        return jobs.length === 2 && jobs.every((job) => job.status === "failed") ? jobs : undefined;
      }, "the refused removals failed");
      for (const job of failed) {
        expect(job.attempts).toBe(5);
        expect(job.last_error).toMatch(/^media storage refused the request: AccessDenied/);
      }
      const gaveUp = log.lines.filter(
        (line) => line.msg === "removal job failed: the files its payload names stay in media storage",
      );
      expect(gaveUp.map((line) => line.level)).toEqual([50, 50]);
      expect(under(`media/${libraryId}/${videoId}`)).toHaveLength(2);
    } finally {
      relay.answers.deletes = "relayed";
    }
  });

  it("answers an upload the bucket refuses 503, as when it is away", async () => {
    const libraryId = (await createLibrary(app, { name: "refusing writes" })).id;
    const videoId = (await createVideo(app, libraryId)).id;
    relay.answers.writes = "access_denied";
    try {
      const refused = await app.request("POST", `${videoPath(libraryId, videoId)}/thumbnails`, {
        body: thumbnailForm(PNG),
      });
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("10");
      expect(refused.body.error).toBe("service_unavailable");
    } finally {
      relay.answers.writes = "relayed";
    }
  });
});

/** How the S3 store reports what the bucket answered a delete: a refusal, or an outage only. */
describe("S3 answers to deletes", () => {
  const storeWith = (settings: Partial<typeof s3.settings>) =>
    new S3BlobStore({ ...s3.settings, timeoutMs: 2000, ...settings });

  it("takes access denied, no such bucket and unknown credentials for refusals", async () => {
    const direct = storeWith({});
    await direct.put("media/refusals/video/file", Readable.from([PNG]), { maxBytes: 1000 });
    relay.answers.deletes = "access_denied";
    try {
      const throughRelay = storeWith({ endpoint: relay.url });
      await expect(throughRelay.delete("media/refusals/video/file")).rejects.toThrow(BlobStoreRefusedError);
      await expect(throughRelay.deletePrefix("media/refusals")).rejects.toThrow(
        /^media storage refused the request: AccessDenied/,
      );
    } finally {
      relay.answers.deletes = "relayed";
    }
    const refusing = [
      storeWith({ bucket: "missing-bucket" }),
      // s3rver checks no SigV4 signature, so a wrong secret (SignatureDoesNotMatch) cannot be shown here.
      storeWith({ credentials: { accessKeyId: "WRONG", secretAccessKey: "S3RVER" } }),
    ];
    const reasons = [];
    for (const store of refusing) {
      const refused = await store.delete("media/refusals/video/file").catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(BlobStoreRefusedError);
      reasons.push((refused as Error).message);
    }
    expect(reasons).toEqual([
      "media storage refused the request: NoSuchBucket (HTTP 404)",
      "media storage refused the request: InvalidAccessKeyId (HTTP 403)",
    ]);
    expect(under("media/refusals")).toEqual(["media/refusals/video/file"]);
    await direct.deletePrefix("media/refusals");
  });

  it("takes a 503 or no connection for an outage, not a refusal", async () => {
    relay.answers.deletes = "unavailable";
    try {
      const failing = await storeWith({ endpoint: relay.url })
        .delete("media/refusals/video/file")
        .catch((error: unknown) => error);
      expect(failing).toBeInstanceOf(BlobStoreUnavailableError);
      expect(failing).not.toBeInstanceOf(BlobStoreRefusedError);
    } finally {
      relay.answers.deletes = "relayed";
    }
    const closed = await storeWith({ endpoint: "http://127.0.0.1:1" })
      .delete("media/refusals/video/file")
      .catch((error: unknown) => error);
    expect(closed).toBeInstanceOf(BlobStoreUnavailableError);
    expect(closed).not.toBeInstanceOf(BlobStoreRefusedError);
  });
});
