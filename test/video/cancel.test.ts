import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { ffmpegsIn, generateClip } from "../support/media.ts";
import { testStoreKind } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import { fileBytes, uploadSource, videoPath, waitForStatus } from "./support.ts";

// The run does not depend on the store: once, with the SQLite pass.
describe.runIf(testStoreKind() === "sqlite")("a video deleted while ffmpeg works on it", () => {
  let t: TestApp;
  let work: string;
  beforeAll(async () => {
    // One ffmpeg at a time, as a busy node has: a run left going holds up every other video.
    t = await startTestApp({ CUMULO_FFMPEG_CONCURRENCY: "1" });
    work = mkdtempSync(join(tmpdir(), "cumulo-video-cancel-"));
  });
  afterAll(async () => {
    await t.close();
    rmSync(work, { recursive: true, force: true });
  });

  /** A new library's video whose ffmpeg run has started. */
  async function transcodingLongVideo(libraryName: string) {
    // A minute of 720p: its ladder takes ffmpeg far longer than the few seconds allowed below.
    const long = await generateClip(work, { seconds: 60, width: 1280, height: 720, audio: false });
    const library = await t.request("POST", "/v1/media/libraries", { json: { name: libraryName } });
    const libraryId: string = library.body.data.id;
    const video = await t.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
      json: { title: "long" },
    });
    const videoId: string = video.body.data.id;
    expect((await uploadSource(t, libraryId, videoId, fileBytes(long))).status).toBe(202);
    await waitForStatus(t, libraryId, videoId, ["transcoding"]);
    await waitUntil(
      () => (ffmpegsIn(t.store.dataDir).length > 0 ? true : undefined),
      10_000,
      "ffmpeg started",
    );
    return { libraryId, videoId };
  }

  it("ends its ffmpeg run within a heartbeat, and the next video is processed", async () => {
    const { libraryId, videoId } = await transcodingLongVideo("Cancel");

    expect((await t.request("DELETE", videoPath(libraryId, videoId))).status).toBe(200);
    // Before: it ran to the end (45 s for a 1080p clip in the QA of 4 December), the slot held.
    await waitUntil(
      () => (ffmpegsIn(t.store.dataDir).length === 0 ? true : undefined),
      8_000,
      "the deleted video's ffmpeg to end",
    );

    const short = await generateClip(work, { seconds: 1, width: 320, height: 180 });
    const next = await t.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
      json: { title: "next" },
    });
    expect((await uploadSource(t, libraryId, next.body.data.id, fileBytes(short))).status).toBe(202);
    await waitForStatus(t, libraryId, next.body.data.id, ["ready"]);
  }, 120_000);

  it("ends a run whose job another run took over (its lease ran out), recording nothing", async () => {
    const { libraryId, videoId } = await transcodingLongVideo("Taken over");

    // What another worker's claim does once this process stalled past the lease (a paused VM, a
    // loaded host): the job's next attempt, leased to it. Held far ahead so nothing here claims it.
    const job = () =>
      t.cumulo.store.db
        .selectFrom("jobs")
        .select(["status", "attempts"])
        .where("kind", "=", "video.process")
        .where("payload", "like", `%${videoId}%`)
        .executeTakeFirstOrThrow();
    const claimed = await job();
    await t.cumulo.store.db
      .updateTable("jobs")
      .set({ attempts: claimed.attempts + 1, locked_until: "9999-01-01T00:00:00.000Z" })
      .where("kind", "=", "video.process")
      .where("payload", "like", `%${videoId}%`)
      .execute();

    // Before: the run went on to the end, beside the new owner's, and recorded its outcome.
    await waitUntil(
      () => (ffmpegsIn(t.store.dataDir).length === 0 ? true : undefined),
      8_000,
      "the taken-over run's ffmpeg to end",
    );
    expect(await job()).toEqual({ status: "running", attempts: claimed.attempts + 1 });
    const after = await t.request("GET", videoPath(libraryId, videoId));
    expect(after.body.data.status).toBe("transcoding");
    expect((await t.request("DELETE", videoPath(libraryId, videoId))).status).toBe(200);
  }, 120_000);
});
