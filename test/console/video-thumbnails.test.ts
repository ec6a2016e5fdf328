import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Locator, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { waitUntilActive } from "../media/helpers.ts";
import {
  accessibilityViolations,
  freePort,
  pageWidth,
  policyViolations,
  screenshot,
} from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";
import { generateClip, ONE_PIXEL_PNG } from "../support/media.ts";
import { waitUntil } from "../support/wait.ts";

const EMAIL = "video-thumbnails@example.invalid";
const PHONE = { width: 390, height: 844 };
/** The list's thumbnail box (16:9), whether it holds the image or its placeholder. */
const BOX = { width: 96, height: 54 };

/** Whether the image has been loaded and decoded (a refused or broken one has no natural width). */
const imageLoaded = (image: Locator) =>
  image.evaluate((element: any) => element.complete && element.naturalWidth > 0);

/** The row of the videos table titled `title`. */
const rowOf = (page: Page, title: string) =>
  page
    .getByRole("table", { name: "Videos" })
    .locator("tbody tr", { has: page.getByRole("link", { name: title, exact: true }) });

/**
 * The library page's videos table shows each video's thumbnail beside its title, through the edge
 * (with a playback token in a private library), and a placeholder of the same size until a video has one.
 */
describeInBrowser("the console in Chromium: thumbnails in a library's videos table", () => {
  let app: ConsoleApp;
  let page: Page;
  let workDir: string;
  let publicId: string;
  let privateId: string;
  let sunriseId: string;

  /** A library (active), with a video `title` made from a real clip and processed until ready. */
  async function libraryWithReadyVideo(name: string, privacy: string, title: string, clip: string) {
    const library = await app.request("POST", "/v1/media/libraries", {
      json: { name, default_privacy: privacy },
    });
    expect(library.status).toBe(201);
    const libraryId: string = library.body.data.id;
    await waitUntilActive(app, libraryId, 15_000);
    const video = await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, { json: { title } });
    expect(video.status).toBe(201);
    const path = `/v1/media/libraries/${libraryId}/videos/${video.body.data.id}`;
    const upload = await app.request("PUT", `${path}/source`, {
      headers: { "content-type": "application/octet-stream" },
      body: readFileSync(clip),
    });
    expect(upload.status).toBe(202);
    await waitUntil(
      async () => (await app.request("GET", path)).body.data.status === "ready",
      90_000,
      `${title} ready`,
    );
    return { libraryId, videoId: video.body.data.id as string };
  }

  beforeAll(async () => {
    workDir = mkdtempSync(join(tmpdir(), "cumulo-video-thumbnails-"));
    app = await startConsoleApp(
      { CUMULO_EDGE_PORT: String(await freePort()) },
      { users: [{ email: EMAIL }] },
    );
    const clip = await generateClip(workDir, { seconds: 1, width: 320, height: 180 });
    ({ libraryId: publicId, videoId: sunriseId } = await libraryWithReadyVideo(
      "Open films",
      "public",
      "Sunrise",
      clip,
    ));
    ({ libraryId: privateId } = await libraryWithReadyVideo("Private films", "private", "Secret", clip));
    // A video waiting for its file: no thumbnail yet.
    const waiting = await app.request("POST", `/v1/media/libraries/${publicId}/videos`, {
      json: { title: "Still waiting for its file" },
    });
    expect(waiting.status).toBe(201);
    ({ page } = await app.launch(EMAIL));
  }, 240_000);

  afterAll(async () => {
    await app?.close();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it("shows a ready video's thumbnail in its row, lazily loaded, and a placeholder box for one not ready", async () => {
    await page.emulateMedia({ colorScheme: "light" });
    await page.goto(`/console/libraries/${publicId}`);
    const image = rowOf(page, "Sunrise").locator("img");
    await image.waitFor();
    await expect(image.getAttribute("loading")).resolves.toBe("lazy");
    // Decorative: the title beside it names the row.
    await expect(image.getAttribute("alt")).resolves.toBe("");
    await expect(image.getAttribute("src")).resolves.toMatch(/\/thumbnail\.jpg\?v=/);
    await waitUntil(() => imageLoaded(image), 30_000, "the thumbnail loaded");
    const waiting = rowOf(page, "Still waiting for its file");
    await expect(waiting.locator("img").count()).resolves.toBe(0);
    const placeholder = waiting.locator(".thumbnail-placeholder");
    // Image and placeholder take the same box, so a row does not move when its image comes.
    for (const box of [await image.boundingBox(), await placeholder.boundingBox()]) {
      expect({ width: box?.width, height: box?.height }).toEqual(BOX);
    }
    await expect(accessibilityViolations(page)).resolves.toEqual([]);
    await page.screenshot({ path: "/tmp/video-thumbs-desktop-light.png", fullPage: true });
    await screenshot(page, "video-thumbnails-1280");
  });

  it("shows a private library's thumbnails with a playback token", async () => {
    await page.goto(`/console/libraries/${privateId}`);
    const image = rowOf(page, "Secret").locator("img");
    await image.waitFor();
    await expect(image.getAttribute("src")).resolves.toMatch(/[?&]token=[^&]+&expires=\d+/);
    // The edge answered the image (a 403 leaves a broken image of width 0).
    await waitUntil(() => imageLoaded(image), 30_000, "the private thumbnail loaded");
  });

  it("fits the thumbnail in a phone's card, in the dark theme", async () => {
    await page.setViewportSize(PHONE);
    await page.emulateMedia({ colorScheme: "dark" });
    try {
      await page.goto(`/console/libraries/${publicId}`);
      await page.locator('html[data-theme="dark"]').waitFor({ state: "attached" });
      const row = rowOf(page, "Sunrise");
      const image = row.locator("img");
      await waitUntil(() => imageLoaded(image), 30_000, "the thumbnail loaded");
      const [card, thumbnail] = [await row.boundingBox(), await image.boundingBox()];
      expect({ width: thumbnail?.width, height: thumbnail?.height }).toEqual(BOX);
      expect((thumbnail?.x ?? 0) + (thumbnail?.width ?? 0)).toBeLessThanOrEqual(
        (card?.x ?? 0) + (card?.width ?? 0),
      );
      await expect(pageWidth(page)).resolves.toBeLessThanOrEqual(PHONE.width);
      await expect(accessibilityViolations(page)).resolves.toEqual([]);
      await page.screenshot({ path: "/tmp/video-thumbs-phone-dark.png", fullPage: true });
      await screenshot(page, "video-thumbnails-390-dark");
    } finally {
      await page.emulateMedia({ colorScheme: null });
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });

  it("shows a newly uploaded thumbnail at once, not the one the browser kept", async () => {
    await page.goto(`/console/libraries/${publicId}`);
    const image = rowOf(page, "Sunrise").locator("img");
    await waitUntil(() => imageLoaded(image), 30_000, "the generated thumbnail loaded");
    // The generated thumbnail is the clip's 320x180 frame; the upload is a 1x1 PNG.
    await expect(image.evaluate((element: any) => element.naturalWidth)).resolves.toBe(320);
    const form = new FormData();
    form.append("file", new Blob([ONE_PIXEL_PNG], { type: "image/png" }), "cover.png");
    const uploaded = await app.request(
      "POST",
      `/v1/media/libraries/${publicId}/videos/${sunriseId}/thumbnails`,
      { body: form },
    );
    expect(uploaded.status).toBe(200);
    await page.reload();
    await waitUntil(
      () => image.evaluate((element: any) => element.complete && element.naturalWidth === 1),
      30_000,
      "the uploaded thumbnail shown",
    );
  });

  it("asks for playback tokens once the library is made private on its own page", async () => {
    await page.goto(`/console/libraries/${publicId}`);
    const image = rowOf(page, "Sunrise").locator("img");
    await waitUntil(() => imageLoaded(image), 30_000, "the public thumbnail loaded");
    await expect(image.getAttribute("src")).resolves.not.toMatch(/[?&]token=/);
    await page.getByLabel("Video privacy").selectOption("private");
    await page.getByRole("button", { name: "Save security settings" }).click();
    // Without a token the edge now refuses it; the list reads the privacy again with the save.
    await waitUntil(
      async () => /[?&]token=[^&]+&expires=\d+/.test((await image.getAttribute("src")) ?? ""),
      30_000,
      "the thumbnail's address with a token",
    );
    await waitUntil(() => imageLoaded(image), 30_000, "the private thumbnail loaded");
  });

  it("breaks none of the console's Content-Security-Policy on these pages", () => {
    expect(policyViolations).toEqual([]);
  });
});
