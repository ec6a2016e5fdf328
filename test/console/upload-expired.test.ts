import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import type { Page, Request } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { waitUntilActive } from "../media/helpers.ts";
import { freePort, policyViolations, screenshot } from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";
import {
  isTus,
  multiChunkClip,
  reloadMidUpload,
  TUS_CHUNK,
  videosInLibrary,
} from "../support/console-uploads.ts";
import { waitUntil } from "../support/wait.ts";

const EMAIL = "expiry@example.invalid";
/**
 * `CUMULO_UPLOAD_EXPIRY_S`: long enough for the first chunk, a reload and the list's `HEAD`, short
 * enough to wait for in a test.
 */
const EXPIRY_S = 15;

/**
 * An unfinished upload that expires on the server before the person resumes it: the resume's `HEAD`
 * is answered 410 (tus's expiration extension), and the console offers to send the file again. And
 * one whose video is deleted before the resume.
 */
describeInBrowser("the console in Chromium: an unfinished upload that expired", () => {
  let app: ConsoleApp;
  let page: Page;
  let workDir: string;
  let libraryId: string;
  let clip: string;

  const videosOf = () => videosInLibrary(app, libraryId);
  const headStatus = async (uploadId: string) =>
    (await app.request("HEAD", `/v1/media/tus/${uploadId}`, { headers: { "tus-resumable": "1.0.0" } }))
      .status;

  /** Uploads the clip's first chunk as a new video, then reloads the tab mid-upload. */
  const uploadFirstChunkThenReload = async (title: string) =>
    (await reloadMidUpload(page, { libraryId, libraryName: "Expiring", file: clip, title })).uploadId;

  beforeAll(async () => {
    workDir = mkdtempSync(`${tmpdir()}/cumulo-console-expiry-`);
    app = await startConsoleApp(
      { CUMULO_EDGE_PORT: String(await freePort()), CUMULO_UPLOAD_EXPIRY_S: String(EXPIRY_S) },
      { users: [{ email: EMAIL }] },
    );
    const library = await app.request("POST", "/v1/media/libraries", {
      json: { name: "Expiring", default_privacy: "public" },
    });
    libraryId = library.body.data.id;
    await waitUntilActive(app, libraryId);
    clip = await multiChunkClip(workDir);
    ({ page } = await app.launch(EMAIL));
  }, 180_000);
  afterAll(async () => {
    await app?.close();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it("offers to upload the file again from the start when resuming meets 410, and the video gets its file", async () => {
    const uploadId = await uploadFirstChunkThenReload("Expired meanwhile");
    const video = (await videosOf()).find((item) => item.title === "Expired meanwhile");
    expect(video?.status).toBe("created");
    const unfinished = page.getByRole("region", { name: "Unfinished uploads" });
    const fileName = clip.split("/").pop() ?? "";
    const item = unfinished.getByRole("listitem").filter({ hasText: fileName });
    // Listed while the server still has it: the list's HEAD found the first chunk.
    await item.locator(`[data-upload-offset="${TUS_CHUNK}"]`).waitFor();

    // The upload expires on the server (CUMULO_UPLOAD_EXPIRY_S): its HEAD is 410 Gone.
    await waitUntil(async () => (await headStatus(uploadId)) === 410, (EXPIRY_S + 10) * 1000, "410");

    const heads: number[] = [];
    const recordHead = (response: { request(): Request; status(): number }) => {
      if (response.request().method() === "HEAD" && isTus(response.request())) heads.push(response.status());
    };
    page.on("response", recordHead);
    await item.getByLabel("Choose").setInputFiles(clip);
    await item.getByRole("button", { name: "Resume upload" }).click();
    const notice = unfinished.getByRole("status").filter({ hasText: "can no longer be resumed" });
    await notice.waitFor();
    page.off("response", recordHead);
    expect(heads).toContain(410);
    expect(await notice.textContent()).toContain("“Expired meanwhile”");
    await expect(item.count()).resolves.toBe(0);
    await screenshot(page, "unfinished-upload-expired");

    // The offer sends the same file to the same video, from the first byte, as a new upload.
    const created: string[] = [];
    const recordCreation = (request: Request) => {
      if (request.method() === "POST" && isTus(request)) created.push(request.url());
    };
    page.on("request", recordCreation);
    await unfinished.getByRole("button", { name: `Upload “${fileName}” again from the start` }).click();
    await page.waitForURL(`**/videos/${video?.id}`, { timeout: 60_000 });
    page.off("request", recordCreation);
    expect(created).toHaveLength(1);
    await page.locator('[data-processing-status="ready"]').waitFor({ timeout: 90_000 });
    const videos = await videosOf();
    expect(videos.filter((item) => item.title === "Expired meanwhile")).toHaveLength(1);
  });

  it("says so when the video was deleted before the resume, and offers neither a new upload nor its page", async () => {
    await uploadFirstChunkThenReload("Deleted meanwhile");
    const video = (await videosOf()).find((item) => item.title === "Deleted meanwhile");
    const unfinished = page.getByRole("region", { name: "Unfinished uploads" });
    const item = unfinished.getByRole("listitem").filter({ hasText: "Deleted meanwhile" });
    await item.locator(`[data-upload-offset="${TUS_CHUNK}"]`).waitFor();
    const deleted = await app.request("DELETE", `/v1/media/libraries/${libraryId}/videos/${video?.id}`);
    expect(deleted.status).toBe(200);

    await item.getByLabel("Choose").setInputFiles(clip);
    await item.getByRole("button", { name: "Resume upload" }).click();
    const notice = unfinished.getByRole("status").filter({ hasText: "“Deleted meanwhile”" });
    await notice.waitFor();
    expect(await notice.textContent()).toContain("the video was deleted");
    await expect(unfinished.getByRole("button", { name: /again from the start/ }).count()).resolves.toBe(0);
    await expect(unfinished.getByRole("link", { name: /Deleted meanwhile/ }).count()).resolves.toBe(0);
  });

  it("breaks none of the console's Content-Security-Policy on these pages", () => {
    expect(policyViolations).toEqual([]);
  });
});
