import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { waitUntilActive } from "../media/helpers.ts";
import { freePort, screenshot } from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";
import { generateClip } from "../support/media.ts";
import { videoPath, waitForStatus } from "../video/support.ts";

/** The cues the embed page's video shows at `seconds`, paused there. */
async function cuesAt(page: Page, seconds: number): Promise<string[]> {
  await page.evaluate((at) => {
    const video = (globalThis as any).document.querySelector("video");
    video.pause();
    video.currentTime = at;
  }, seconds);
  await page.waitForFunction((at) => {
    const video = (globalThis as any).document.querySelector("video");
    return !video.seeking && Math.abs(video.currentTime - at) < 0.01;
  }, seconds);
  return page.evaluate(() => {
    const video = (globalThis as any).document.querySelector("video");
    return [...video.textTracks].flatMap((track: any) =>
      [...(track.activeCues ?? [])].map((cue: any) => cue.text),
    );
  });
}

describeInBrowser("the embed page in Chromium: captions in time with the picture", () => {
  let app: ConsoleApp;
  let browser: Browser;
  let workDir: string;
  let libraryId: string;
  let videoId: string;

  beforeAll(async () => {
    workDir = mkdtempSync(`${tmpdir()}/cumulo-embed-captions-`);
    app = await startConsoleApp({ CUMULO_EDGE_PORT: String(await freePort()) });
    libraryId = (await app.request("POST", "/v1/media/libraries", { json: { name: "Captions" } })).body.data
      .id;
    await waitUntilActive(app, libraryId, 15_000);
    videoId = (
      await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, { json: { title: "Cues" } })
    ).body.data.id;
    const clip = await generateClip(workDir, { seconds: 4, width: 320, height: 180 });
    const uploaded = await app.request("PUT", `${videoPath(libraryId, videoId)}/source`, {
      headers: { "content-type": "application/octet-stream" },
      body: readFileSync(clip),
    });
    expect(uploaded.status, uploaded.text).toBe(202);
    const form = new FormData();
    form.set("title", "English");
    form.set("language", "en");
    form.set(
      "file",
      new Blob(["WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nFirst\n\n00:00:01.500 --> 00:00:04.000\nSecond\n"]),
      "en.vtt",
    );
    const added = await app.request("POST", `${videoPath(libraryId, videoId)}/subtitles`, { body: form });
    expect(added.status, added.text).toBe(201);
    await waitForStatus(app, libraryId, videoId, ["ready"], 90_000);
    browser = await app.launchBrowser();
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  it("shows each cue over the part of the video its times name", async () => {
    const page = await browser.newPage({ viewport: { width: 640, height: 360 } });
    await page.goto(`${app.baseUrl}/embed/${libraryId}/${videoId}`);
    // hls.js has loaded the subtitle track's cues.
    await page.waitForFunction(
      () =>
        [...((globalThis as any).document.querySelector("video")?.textTracks ?? [])].some(
          (track: any) => (track.cues?.length ?? 0) === 2,
        ),
      undefined,
      { timeout: 30_000 },
    );
    // Before, the segments' 1.48 s start was not mapped: at 0.5 s "Second" was shown.
    expect(await cuesAt(page, 0.5)).toEqual(["First"]);
    await screenshot(page, "embed-captions");
    // One audio track, muxed in the rungs: no track picker.
    expect(await page.locator("#cumulo-audio").isHidden()).toBe(true);
    expect(await cuesAt(page, 1.3)).toEqual(["First"]);
    expect(await cuesAt(page, 1.8)).toEqual(["Second"]);
    expect(await cuesAt(page, 3.5)).toEqual(["Second"]);
    await page.close();
  });
});
