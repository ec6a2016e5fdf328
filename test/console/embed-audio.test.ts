import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { waitUntilActive } from "../media/helpers.ts";
import { freePort, screenshot } from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";
import { lavfi, testMediaTools } from "../support/media.ts";
import { videoPath, waitForStatus } from "../video/support.ts";

/** A third track's title, longer than the player is wide. */
const LONG_TITLE = `Commentary ${"and more ".repeat(32)}`.trim();

describeInBrowser("the embed page in Chromium: a video's audio tracks", () => {
  let app: ConsoleApp;
  let browser: Browser;
  let workDir: string;
  let libraryId: string;
  let videoId: string;

  beforeAll(async () => {
    workDir = mkdtempSync(`${tmpdir()}/cumulo-embed-audio-`);
    app = await startConsoleApp({ CUMULO_EDGE_PORT: String(await freePort()) });
    libraryId = (await app.request("POST", "/v1/media/libraries", { json: { name: "Dubbed" } })).body.data.id;
    await waitUntilActive(app, libraryId, 15_000);
    videoId = (
      await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, { json: { title: "Two tracks" } })
    ).body.data.id;
    const source = join(workDir, "dubbed.mkv");
    await testMediaTools().ffmpeg([
      ...lavfi("testsrc=size=320x180:rate=25:duration=8"),
      ...lavfi("sine=frequency=440:duration=8"),
      ...lavfi("sine=frequency=660:duration=8"),
      ...["-map", "0", "-map", "1", "-map", "2", "-map", "2", "-c:v", "libx264", "-preset", "ultrafast"],
      ...["-pix_fmt", "yuv420p", "-c:a", "aac", "-metadata:s:a:0", "language=eng"],
      ...["-metadata:s:a:1", "language=spa", "-metadata:s:a:2", `title=${LONG_TITLE}`, source],
    ]);
    const uploaded = await app.request("PUT", `${videoPath(libraryId, videoId)}/source`, {
      headers: { "content-type": "application/octet-stream" },
      body: readFileSync(source),
    });
    expect(uploaded.status, uploaded.text).toBe(202);
    await waitForStatus(app, libraryId, videoId, ["ready"], 90_000);
    browser = await app.launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  it("lists the tracks by name, and plays the one picked from its own audio rendition", async () => {
    const page = await browser.newPage({ viewport: { width: 640, height: 360 } });
    const fetched: string[] = [];
    page.on("request", (request) => fetched.push(new URL(request.url()).pathname));
    await page.goto(`${app.baseUrl}/embed/${libraryId}/${videoId}`);
    const picker = page.getByRole("combobox", { name: "Audio track" });
    await picker.waitFor({ state: "visible", timeout: 30_000 });
    expect(await picker.locator("option").allTextContents()).toEqual(["English", "Spanish", LONG_TITLE]);
    expect(await picker.inputValue()).toBe("0");
    // A long title does not stretch the picker across the picture.
    expect((await picker.boundingBox())?.width).toBeLessThanOrEqual(320);
    await page.evaluate(() => {
      const video = (globalThis as any).document.querySelector("video");
      video.muted = true;
      return video.play();
    });
    await picker.selectOption({ label: "Spanish" });
    // hls.js fetches the Spanish rendition's playlist and segments, and the picture plays on with it.
    await page.waitForFunction(
      () => (globalThis as any).document.querySelector("video").currentTime > 3,
      undefined,
      { timeout: 30_000 },
    );
    expect(fetched.some((path) => /\/audio_2\/index\.m3u8$/.test(path))).toBe(true);
    expect(fetched.some((path) => /\/audio_2\/segment_\d+\.ts$/.test(path))).toBe(true);
    expect(await page.locator("#cumulo-error").isHidden()).toBe(true);
    await screenshot(page, "embed-audio-tracks");
    await page.close();
  }, 60_000);

  it("shows no picker when the player's theme has no controls", async () => {
    const page = await browser.newPage({ viewport: { width: 640, height: 360 } });
    const player = await app.request("POST", `/v1/media/libraries/${libraryId}/players`, {
      json: { name: "Bare", theme: { controls: [] } },
    });
    expect(player.status, player.text).toBe(201);
    await page.goto(`${app.baseUrl}/embed/${libraryId}/${videoId}?player=${player.body.data.id}`);
    // The tracks are known once the master is read: the picker stays hidden all the same.
    await page.waitForFunction(
      () => (globalThis as any).document.querySelector("#cumulo-audio").options.length === 3,
      undefined,
      { timeout: 30_000 },
    );
    expect(await page.locator("#cumulo-audio").isHidden()).toBe(true);
    await page.close();
  }, 60_000);
});
