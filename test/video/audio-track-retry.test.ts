import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { capturingLogger } from "../fuzz/log-capture.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp } from "../support/app.ts";
import { lavfi, testMediaTools } from "../support/media.ts";
import { fileBytes, uploadSource, videoPath, waitForStatus } from "./support.ts";

/**
 * A track the probe takes but ffmpeg cannot mix down (three channels laid out FL+FC+LFE): the video
 * was failed for it before session 49; it is made again without the other tracks, and says so.
 */
it("makes a video again without another audio track ffmpeg fails on, and logs why", async () => {
  const work = mkdtempSync(join(tmpdir(), "cumulo-track-retry-"));
  const { logger, lines } = capturingLogger("warn");
  const t = await startTestApp({}, { logger });
  try {
    const source = join(work, "uneven-layout.mov");
    await testMediaTools().ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=2", "sine=duration=2"),
      ...["-filter_complex", "[1:a]asplit=3[a][b][c];[a][b][c]join=inputs=3:channel_layout=FL+FC+LFE[odd]"],
      ...["-map", "0:v", "-map", "1:a", "-map", "[odd]", "-c:v", "libx264", "-preset", "ultrafast"],
      ...["-c:a:0", "aac", "-c:a:1", "pcm_s16le", source],
    ]);
    const libraryId = (await createLibrary(t)).id;
    const videoId = (await createVideo(t, libraryId)).id;
    expect((await uploadSource(t, libraryId, videoId, fileBytes(source))).status).toBe(202);
    const video = await waitForStatus(t, libraryId, videoId, ["ready", "failed"], 60_000);
    const processing = await t.request("GET", `${videoPath(libraryId, videoId)}/processing`);
    expect(video.status, JSON.stringify(processing.body)).toBe("ready");
    const retry = lines.find(
      (line) => line.msg === "video processed again with fewer audio tracks: the run with them all failed",
    );
    expect(retry).toMatchObject({ videoId, reason: expect.stringContaining("ffmpeg") });
    // ffmpeg names its input by path: the job's folder is left out, as in a failure reason.
    expect(String(retry?.reason)).not.toContain(t.store.dataDir);
  } finally {
    await t.close();
    rmSync(work, { recursive: true, force: true });
  }
}, 90_000);
