import { copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import type { BrowserContext, Page, Request, Route } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { waitUntilActive } from "../media/helpers.ts";
import { freePort, policyViolations, screenshot, signInInBrowser } from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";
import {
  type ConsoleUpload,
  isTus,
  multiChunkClip,
  reloadMidUpload,
  startHeldUpload,
  TUS_CHUNK,
  videosInLibrary,
} from "../support/console-uploads.ts";
import { generateClip } from "../support/media.ts";

const EMAIL = "resume@example.invalid";
const OTHER_EMAIL = "colleague@example.invalid";

describeInBrowser("the console in Chromium: an upload resumed after a reload", () => {
  let app: ConsoleApp;
  let context: BrowserContext;
  let page: Page;
  let workDir: string;
  let libraryId: string;
  /** A real video of more than one chunk. */
  let clip: string;
  /** Another file with the clip's name (and another size and date). */
  let impostor: string;

  const videosOf = () => videosInLibrary(app, libraryId);
  /** What the server has of a tus upload (`Upload-Offset`), asked with the API key. */
  const offsetOnServer = async (uploadId: string) => {
    const answer = await app.request("HEAD", `/v1/media/tus/${uploadId}`, {
      headers: { "tus-resumable": "1.0.0" },
    });
    return answer.status === 200 ? Number(answer.headers.get("upload-offset")) : answer.status;
  };

  const signInAs = (email: string) => signInInBrowser(page, email);

  const upload = (title: string): ConsoleUpload => ({
    libraryId,
    libraryName: "Resumable",
    file: clip,
    title,
  });

  /** `reloadMidUpload`, where the browser must ask before the person leaves. */
  async function uploadThenReload(title: string): Promise<string> {
    const { uploadId, asked } = await reloadMidUpload(page, upload(title));
    expect(asked).toBe(true);
    return uploadId;
  }

  beforeAll(async () => {
    workDir = mkdtempSync(`${tmpdir()}/cumulo-console-resume-`);
    app = await startConsoleApp(
      { CUMULO_EDGE_PORT: String(await freePort()) },
      { users: [{ email: EMAIL }, { email: OTHER_EMAIL }] },
    );
    const library = await app.request("POST", "/v1/media/libraries", {
      json: { name: "Resumable", default_privacy: "public" },
    });
    libraryId = library.body.data.id;
    await waitUntilActive(app, libraryId);
    clip = await multiChunkClip(workDir);
    const other = await generateClip(workDir, { seconds: 2, width: 320, height: 180 });
    mkdirSync(`${workDir}/other`);
    impostor = `${workDir}/other/${clip.split("/").pop()}`;
    copyFileSync(other, impostor);
    ({ context, page } = await app.launch(EMAIL));
  }, 180_000);
  afterAll(async () => {
    await app?.close();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it("continues from the server's offset after a reload with the same file only, and the video plays", async () => {
    const uploadId = await uploadThenReload("Resumed after reload");
    const offsetBefore = await offsetOnServer(uploadId);
    expect(offsetBefore).toBe(TUS_CHUNK);
    const video = (await videosOf()).find((item) => item.title === "Resumed after reload");
    expect(video?.status).toBe("created");

    // Back on the library page: the upload is offered, with what the server has of it.
    const unfinished = page.getByRole("region", { name: "Unfinished uploads" });
    const fileName = clip.split("/").pop() ?? "";
    const item = unfinished.getByRole("listitem").filter({ hasText: fileName });
    await item.locator(`[data-upload-offset="${TUS_CHUNK}"]`).waitFor();
    await expect(item.getByRole("link", { name: "Resumed after reload" }).count()).resolves.toBe(1);
    await screenshot(page, "unfinished-upload");

    const sent: Request[] = [];
    const record = (request: Request) => {
      if (isTus(request) || request.url().endsWith("/upload-authorization")) sent.push(request);
    };
    page.on("request", record);
    try {
      // Another file of the same name is refused before anything is sent.
      const chooser = item.getByLabel(`Choose “${fileName}” again`);
      await chooser.setInputFiles(impostor);
      await item.getByRole("button", { name: "Resume upload" }).click();
      await item
        .locator('[data-field-error="file"]', { hasText: "This is not the file of this upload" })
        .waitFor();
      expect(sent).toEqual([]);
      expect(await offsetOnServer(uploadId)).toBe(TUS_CHUNK);
      await screenshot(page, "unfinished-upload-other-file");

      // The same file continues the same upload, with a fresh authorization, from the server's offset.
      await chooser.setInputFiles(clip);
      await item.getByRole("button", { name: "Resume upload" }).click();
      await page.waitForURL(`**/console/libraries/${libraryId}/videos/${video?.id}`, { timeout: 30_000 });
    } finally {
      page.off("request", record);
    }
    expect(sent[0]?.url()).toContain(`/videos/${video?.id}/upload-authorization`);
    const tusRequests = sent.filter(isTus);
    expect(tusRequests.some((request) => request.method() === "POST")).toBe(false);
    expect(tusRequests.every((request) => request.url().endsWith(`/v1/media/tus/${uploadId}`))).toBe(true);
    const patches = tusRequests.filter((request) => request.method() === "PATCH");
    expect(patches.length).toBeGreaterThan(0);
    expect(patches[0]?.headers()["upload-offset"]).toBe(String(TUS_CHUNK));
    expect(patches[0]?.headers().authorizationsignature).toBeTruthy();
    expect(await offsetOnServer(uploadId)).toBe(statSync(clip).size);

    await page.locator('[data-processing-status="ready"]').waitFor({ timeout: 90_000 });
    const player = page.locator("video");
    await page.waitForFunction(
      () => ((globalThis as any).document.querySelector("video")?.readyState ?? 0) >= 2,
      undefined,
      { timeout: 30_000 },
    );
    await player.evaluate((element: any) => element.play());
    await page.waitForFunction(
      () => ((globalThis as any).document.querySelector("video")?.currentTime ?? 0) > 0.3,
      undefined,
      { timeout: 30_000 },
    );
    await screenshot(page, "resumed-video-ready");

    // The finished upload's record is gone: nothing is offered any more.
    await page.goto(`/console/libraries/${libraryId}`);
    await page.getByRole("heading", { name: "Videos" }).waitFor();
    await page.getByRole("link", { name: "Resumed after reload" }).waitFor();
    await expect(page.getByRole("region", { name: "Unfinished uploads" }).count()).resolves.toBe(0);
    await expect(
      page.evaluate(() =>
        Object.keys((globalThis as any).localStorage).filter((key) => key.includes("unfinished-uploads")),
      ),
    ).resolves.toEqual([]);
  });

  it("shows one person's unfinished uploads to nobody else signed in on the same browser", async () => {
    await uploadThenReload("Mine only");
    await page.getByRole("region", { name: "Unfinished uploads" }).getByText("Mine only").waitFor();
    // On a phone the offer fits the screen: nothing scrolls sideways.
    await page.setViewportSize({ width: 375, height: 800 });
    try {
      await page.getByRole("button", { name: "Resume upload" }).scrollIntoViewIfNeeded();
      await expect(
        page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth),
      ).resolves.toBeLessThanOrEqual(375);
      await screenshot(page, "unfinished-upload-phone");
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL("**/console/sign-in");
    await signInAs(OTHER_EMAIL);
    await page.goto(`/console/libraries/${libraryId}`);
    await page.getByRole("link", { name: "Mine only" }).waitFor();
    await expect(page.getByRole("region", { name: "Unfinished uploads" }).count()).resolves.toBe(0);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL("**/console/sign-in");
    // Its owner still finds it after signing in again.
    await signInAs(EMAIL);
    await page.goto(`/console/libraries/${libraryId}`);
    await page.getByRole("region", { name: "Unfinished uploads" }).getByText("Mine only").waitFor();
  });

  it("drops an upload the server no longer has with a message, and uploads that video's file afresh", async () => {
    const uploadId = await uploadThenReload("Lost on the server");
    const video = (await videosOf()).find((item) => item.title === "Lost on the server");
    const unfinished = page.getByRole("region", { name: "Unfinished uploads" });
    await unfinished.getByText("Lost on the server").waitFor();
    // The server drops it (as its expiry would).
    const ended = await app.request("DELETE", `/v1/media/tus/${uploadId}`, {
      headers: { "tus-resumable": "1.0.0" },
    });
    expect(ended.status).toBe(204);
    await page.reload();
    const notice = unfinished.getByRole("status").filter({ hasText: "can no longer be resumed" });
    await notice.waitFor();
    expect(await notice.textContent()).toContain("“Lost on the server”");
    await expect(
      unfinished.getByRole("listitem").filter({ hasText: "Lost on the server" }).count(),
    ).resolves.toBe(0);
    await screenshot(page, "unfinished-upload-gone");

    // Its video, still waiting for a file, takes one from the start.
    const before = (await videosOf()).length;
    await page.getByRole("link", { name: "Lost on the server" }).first().click();
    await page.waitForURL(`**/videos/${video?.id}`);
    const form = page.getByRole("region", { name: "Upload the video's file" });
    await form.getByLabel("Video file").setInputFiles(clip);
    await screenshot(page, "video-file-form");
    await form.getByRole("button", { name: "Upload", exact: true }).click();
    await page.locator('[data-processing-status="ready"]').waitFor({ timeout: 90_000 });
    expect((await videosOf()).length).toBe(before);
    await expect(form.count()).resolves.toBe(0);
  });

  it("keeps a second tab from continuing or discarding an upload the first is sending, until that tab is closed", async () => {
    const first = await context.newPage();
    const { uploadId, release } = await startHeldUpload(first, upload("Sent by the first tab"));
    try {
      await page.goto(`/console/libraries/${libraryId}`);
      const item = page
        .getByRole("region", { name: "Unfinished uploads" })
        .getByRole("listitem")
        .filter({ hasText: "Sent by the first tab" });
      const elsewhere = item.getByRole("status").filter({ hasText: "being uploaded in another tab" });
      await elsewhere.waitFor();
      await expect(item.getByRole("button", { name: "Resume upload" }).isDisabled()).resolves.toBe(true);
      await expect(item.getByRole("button", { name: "Discard" }).isDisabled()).resolves.toBe(true);
      await screenshot(page, "unfinished-upload-other-tab");

      // The video's own page offers no second upload of its file either.
      await item.getByRole("link", { name: "Sent by the first tab" }).click();
      const form = page.getByRole("region", { name: "Upload the video's file" });
      await form.getByText("being uploaded in another tab").waitFor();
      await expect(form.getByRole("button", { name: "Upload", exact: true }).isDisabled()).resolves.toBe(
        true,
      );

      // The first tab is closed mid-upload: the upload is this tab's to continue.
      await page.goto(`/console/libraries/${libraryId}`);
      await elsewhere.waitFor();
      await first.close();
      await elsewhere.waitFor({ state: "detached" });
      await item.getByLabel("Choose").setInputFiles(clip);
      await item.getByRole("button", { name: "Resume upload" }).click();
      await page.waitForURL("**/videos/**", { timeout: 30_000 });
      expect(await offsetOnServer(uploadId)).toBe(statSync(clip).size);
    } finally {
      await release("abort");
      await first.close();
    }
  });

  it("continues the video a failed upload made when Upload is pressed again, instead of making another", async () => {
    await page.goto(`/console/libraries/${libraryId}`);
    await page.getByRole("heading", { name: "Resumable", level: 1 }).waitFor();
    // Every chunk after the first is lost, retries included: the upload fails part-way.
    let patches = 0;
    const dropAfterFirst = (route: Route) =>
      route.request().method() === "PATCH" && ++patches > 1 ? route.abort() : route.continue();
    await page.route("**/v1/media/tus/**", dropAfterFirst);
    const before = (await videosOf()).length;
    try {
      await page.getByLabel("Title").fill("Failed, then again");
      await page.getByLabel("Video file").setInputFiles(clip);
      await page.getByRole("button", { name: "Upload", exact: true }).click();
      await page.getByText(/press Upload again to continue it/).waitFor({ timeout: 30_000 });
    } finally {
      await page.unroute("**/v1/media/tus/**", dropAfterFirst);
    }
    await screenshot(page, "upload-failed-part-way");
    const video = (await videosOf()).find((item) => item.title === "Failed, then again");
    expect((await videosOf()).length).toBe(before + 1);

    await page.getByRole("button", { name: "Upload", exact: true }).click();
    await page.waitForURL(`**/console/libraries/${libraryId}/videos/${video?.id}`, { timeout: 30_000 });
    expect((await videosOf()).length).toBe(before + 1);
    await page.locator('[data-processing-status="ready"]').waitFor({ timeout: 90_000 });
  }, 180_000);

  it("keeps the video of a one-chunk upload cut off part-way, which no answer confirmed, and continues it", async () => {
    const small = await generateClip(workDir, { seconds: 1, width: 160, height: 90 });
    await page.goto(`/console/libraries/${libraryId}`);
    await page.getByRole("heading", { name: "Resumable", level: 1 }).waitFor();
    // The first PATCH reaches the server with half its bytes, and its answer never reaches the
    // browser; every PATCH after it (the retries) is lost too.
    let patches = 0;
    const cutOff = async (route: Route) => {
      if (route.request().method() !== "PATCH") return route.continue();
      if (++patches === 1) {
        const body = route.request().postDataBuffer() ?? Buffer.alloc(0);
        await route.fetch({ postData: body.subarray(0, Math.floor(body.length / 2)) });
      }
      await route.abort();
    };
    await page.route("**/v1/media/tus/**", cutOff);
    try {
      await page.getByLabel("Title").fill("Cut in its only chunk");
      await page.getByLabel("Video file").setInputFiles(small);
      await page.getByRole("button", { name: "Upload", exact: true }).click();
      // Before, the video was removed: "None of the file arrived".
      await page.getByText(/press Upload again to continue it/).waitFor({ timeout: 30_000 });
    } finally {
      await page.unroute("**/v1/media/tus/**", cutOff);
    }
    const video = (await videosOf()).find((item) => item.title === "Cut in its only chunk");
    expect(video).toBeDefined();
    await page.getByRole("button", { name: "Upload", exact: true }).click();
    await page.waitForURL(`**/console/libraries/${libraryId}/videos/${video?.id}`, { timeout: 30_000 });
    await page.locator('[data-processing-status="ready"]').waitFor({ timeout: 90_000 });
  }, 180_000);

  it("breaks none of the console's Content-Security-Policy on these pages", () => {
    expect(policyViolations).toEqual([]);
  });
});
