import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MediaToolError, ToolStartError } from "../../src/video/media-tools.ts";
import { PROCESS_JOB, videoWorkRoot } from "../../src/video/pipeline.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { generateClip } from "../support/media.ts";
import { mountTmpfs, NO_TMPFS, unmountTmpfs } from "../support/tmpfs.ts";
import { waitUntil } from "../support/wait.ts";
import { uploadSource, videoPath, waitForStatus } from "./support.ts";

/**
 * ffmpeg running out of scratch space mid-encode: it rarely says so (a segment cut short is read
 * back as "Invalid data found when processing input"), and the video failed for good as if its
 * file were unreadable. The scratch disk is a real file system of 256 KiB: the source fits, its
 * renditions do not.
 */
describe("a video processed while the worker's scratch disk is full", { timeout: 120_000 }, () => {
  let t: TestApp;
  let work: string;
  let scratch: string;
  let mounted = false;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cumulo-scratch-"));
    t = await startTestApp({ CUMULO_ROLES: "api,worker", CUMULO_EDGE_PORT: "off" });
    scratch = videoWorkRoot(t.config.dataDir);
    mkdirSync(scratch, { recursive: true });
    mounted = mountTmpfs(scratch, "256k");
  }, 60_000);

  afterAll(async () => {
    // Stopped before the disk goes, removed after.
    await t?.cumulo.close();
    if (mounted) unmountTmpfs(scratch);
    await t?.close();
    rmSync(work, { recursive: true, force: true });
  });

  // QA of 5 December (session 42): a tool that could not start for want of file descriptors failed
  // the video for good, as an unreadable file would (test/video/transcoder.test.ts makes one).
  it("waits out a tool that cannot start for want of the machine's resources, as a full disk", () => {
    const handler = t.cumulo.services.video.pipeline.handler();
    expect(handler.isTransient?.(new ToolStartError("EMFILE", "could not run ffmpeg: spawn EMFILE"))).toBe(
      true,
    );
    expect(handler.isTransient?.(new MediaToolError("ffprobe: Invalid data found"))).toBe(false);
  });

  it("postpones the job without failing the video, and processes it once there is room", async (context) => {
    if (!mounted) context.skip(NO_TMPFS);
    const clip = readFileSync(await generateClip(work, { seconds: 3 }));
    expect(clip.length).toBeLessThan(200 * 1024);
    const libraryId = (await createLibrary(t, { name: "scratch" })).id;
    const videoId = (await createVideo(t, libraryId, { title: "encoded on a full disk" })).id;
    expect((await uploadSource(t, libraryId, videoId, clip)).status).toBe(202);

    const jobOf = async () =>
      (
        await t.cumulo.store.db
          .selectFrom("jobs")
          .select(["kind", "attempts", "last_error", "payload"])
          .where("kind", "=", PROCESS_JOB)
          .execute()
      ).find((job) => JSON.stringify(job.payload).includes(videoId));
    const processing = async () =>
      (await t.request("GET", `${videoPath(libraryId, videoId)}/processing`)).body.data;
    const outcome = await waitUntil(
      async () => {
        const job = await jobOf();
        if (job?.last_error) return job.last_error;
        const state = await processing();
        return state.status === "failed" ? `failed: ${state.failure_reason}` : undefined;
      },
      60_000,
      "the job postponed or the video failed",
    );
    expect(outcome).toBe("the scratch disk of video processing is full or read-only");
    expect((await jobOf())?.attempts).toBeLessThanOrEqual(1);
    const waiting = await processing();
    expect(waiting.status).not.toBe("failed");
    expect(waiting.failure_reason).toBeNull();

    // Room again: the next try processes the video.
    expect(spawnSync("mount", ["-o", "remount,size=64m", scratch]).status).toBe(0);
    const ready = await waitForStatus(t, libraryId, videoId, ["ready", "failed"], 60_000);
    expect(ready.status).toBe("ready");
    expect((await processing()).failure_reason).toBeNull();
  });
});
