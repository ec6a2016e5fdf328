import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { waitUntilActive } from "../media/helpers.ts";
import { addSubtitle, freePort, pageWidth, policyViolations, screenshot } from "../support/browser.ts";
import { PASSWORD, signIn as signInApi, withSession } from "../support/console.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";
import { generateClip, ONE_PIXEL_PNG } from "../support/media.ts";

const EMAIL = "videos@example.invalid";
const LONG_HOST = "a-very-long-distribution-host-name-for-the-picker.customer-example-domain.example.com";

/** Signs in on the sign-in page the console led to. */
async function signInHere(page: Page, password = PASSWORD) {
  await page.waitForURL("**/console/sign-in");
  await page.getByLabel("Email").fill(EMAIL);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
}

describeInBrowser("the console in Chromium: video page, private libraries, navigation", () => {
  let app: ConsoleApp;
  let browser: Browser;
  let page: Page;
  let workDir: string;
  let libraryId: string;
  let videoId: string;
  let brokenId: string;

  async function uploadSource(id: string, bytes: Uint8Array) {
    const answer = await app.request("PUT", `/v1/media/libraries/${libraryId}/videos/${id}/source`, {
      headers: { "content-type": "application/octet-stream" },
      body: bytes,
    });
    expect(answer.status).toBeLessThan(300);
  }

  beforeAll(async () => {
    workDir = mkdtempSync(`${tmpdir()}/cumulo-console-video-`);
    app = await startConsoleApp(
      { CUMULO_EDGE_PORT: String(await freePort()) },
      { users: [{ email: EMAIL }] },
    );
    const library = await app.request("POST", "/v1/media/libraries", {
      json: { name: "Private films", default_privacy: "private" },
    });
    libraryId = library.body.data.id;
    await waitUntilActive(app, libraryId, 15_000);
    const clip = await generateClip(workDir, { seconds: 2, width: 320, height: 180 });
    videoId = (
      await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, { json: { title: "Secret" } })
    ).body.data.id;
    await uploadSource(videoId, readFileSync(clip));
    brokenId = (
      await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, { json: { title: "Broken" } })
    ).body.data.id;
    await uploadSource(brokenId, new TextEncoder().encode("this is no video at all\n".repeat(50)));
    await app.request("POST", "/v1/cdn/distributions", {
      json: { hostname: LONG_HOST, origin_url: "https://origin.example.com/" },
    });
    ({ browser, page } = await app.launch());
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  it("returns to a deep link with its query after sign-in", async () => {
    await page.goto(`/console/players?library=${libraryId}`);
    await signInHere(page);
    await page.waitForURL(`**/console/players?library=${libraryId}`);
    await expect(page.getByLabel("Library").inputValue()).resolves.toBe(libraryId);
  });

  it("shows a private video's thumbnail with a playback token and explains embeds need one", async () => {
    await page.goto(`/console/libraries/${libraryId}/videos/${videoId}`);
    await page.locator('[data-processing-status="ready"]').waitFor({ timeout: 90_000 });
    // The breadcrumb names the library.
    await page
      .getByRole("navigation", { name: "Breadcrumb" })
      .getByRole("link", { name: "Private films" })
      .waitFor();
    const thumbnail = page.getByRole("img", { name: "Thumbnail of Secret" });
    await thumbnail.waitFor();
    await expect(thumbnail.getAttribute("src")).resolves.toMatch(/[?&]token=[^&]+&expires=\d+/);
    // The edge answered the image (a 403 leaves a broken image of width 0).
    await page.waitForFunction(() => {
      const image = (globalThis as any).document.querySelector("img.thumbnail");
      return image?.complete && image.naturalWidth > 0;
    });
    const embed = page.locator('[data-embed="private"]');
    await expect(embed.textContent()).resolves.toContain("playback token");
    await expect(embed.textContent()).resolves.toContain("/playback-token");
    await expect(page.locator("#embed-code").count()).resolves.toBe(0);
    // The thumbnail form offers what the API takes: .jpg, .jpeg, .png, .gif.
    const file = page.getByLabel("New thumbnail (JPEG, PNG or GIF)");
    const accept = (await file.getAttribute("accept")) ?? "";
    expect(accept).toContain(".gif");
    expect(accept).not.toContain("webp");
    await screenshot(page, "video-private");
    await page.setViewportSize({ width: 375, height: 800 });
    await expect(pageWidth(page)).resolves.toBeLessThanOrEqual(375);
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it("shows a thumbnail uploaded before the video has a file, with a playback token", async () => {
    const waiting = await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
      json: { title: "Cover first" },
    });
    await page.goto(`/console/libraries/${libraryId}/videos/${waiting.body.data.id}`);
    await page.locator('[data-processing-status="created"]').waitFor();
    await page
      .getByLabel("New thumbnail (JPEG, PNG or GIF)")
      .setInputFiles({ name: "cover.png", mimeType: "image/png", buffer: ONE_PIXEL_PNG });
    await page.getByRole("button", { name: "Upload thumbnail" }).click();
    const thumbnail = page.getByRole("img", { name: "Thumbnail of Cover first" });
    await thumbnail.waitFor();
    // The file is sent: the input is empty again, so a second click sends nothing twice.
    await expect(
      page.getByLabel("New thumbnail (JPEG, PNG or GIF)").evaluate((input: any) => input.files.length),
    ).resolves.toBe(0);
    await expect(thumbnail.getAttribute("src")).resolves.toMatch(/[?&]token=[^&]+&expires=\d+/);
    await page.waitForFunction(() => {
      const image = (globalThis as any).document.querySelector("img.thumbnail");
      return image?.complete && image.naturalWidth > 0;
    });
    // The video still waits for its file: the thumbnail does not wait for it to be ready.
    await expect(page.locator('[data-processing-status="created"]').count()).resolves.toBe(1);
    await page.reload();
    await thumbnail.waitFor();
    await screenshot(page, "video-thumbnail-before-file");
  });

  it("says why the edge refuses to play a video on the console's own page (a referrer rule)", async () => {
    const security = `/v1/media/libraries/${libraryId}/security`;
    await app.request("PUT", security, { json: { referrers: { action: "allow", values: ["example.com"] } } });
    try {
      await page.goto(`/console/libraries/${libraryId}/videos/${videoId}`);
      await page
        .getByRole("alert")
        .filter({
          hasText: "The edge refused to play this video on this page: This referrer may not play this video.",
        })
        .waitFor();
      await page.getByText("The thumbnail could not be shown on this page.").waitFor();
      await page
        .getByText(/list this console's host \(127\.0\.0\.1\)/)
        .first()
        .waitFor();
      await screenshot(page, "video-refused-referrer");

      // With the console's host listed, it previews the library (before, its pages sent the edge no
      // Referer at all, which an allow list refuses whatever it lists).
      await app.request("PUT", security, {
        json: { referrers: { action: "allow", values: ["example.com", "127.0.0.1"] } },
      });
      await page.reload();
      await page.waitForFunction(
        () => ((globalThis as any).document.querySelector("video")?.readyState ?? 0) >= 2,
        undefined,
        { timeout: 30_000 },
      );
      expect(await page.getByText("The edge refused to play").count()).toBe(0);
    } finally {
      await app.request("PUT", security, {
        json: { referrers: { action: "allow", values: [], enabled: false } },
      });
    }
  });

  it("renames the video and deletes another after asking", async () => {
    await page.getByRole("button", { name: "Rename" }).click();
    const dialog = page.getByRole("dialog", { name: "Rename video" });
    await dialog.getByLabel("Title").fill("");
    await dialog.getByRole("button", { name: "Save title" }).click();
    await dialog.locator('[data-field-error="title"]').waitFor();
    await dialog.getByLabel("Title").fill("Secret (final cut)");
    await dialog.getByRole("button", { name: "Save title" }).click();
    await page.getByRole("heading", { name: "Secret (final cut)", level: 1 }).waitFor();

    await page.goto(`/console/libraries/${libraryId}/videos/${brokenId}`);
    await page.locator('[data-processing-status="failed"]').waitFor({ timeout: 30_000 });
    // A plain sentence; the pipeline's own text only on request.
    await page.getByText("The file could not be read as a video.").waitFor();
    // It will never be ready: the thumbnail panel does not say to wait for that.
    await page.getByText("No thumbnail: processing failed. Upload one below.").waitFor();
    // Nor does it offer an embed code that would never play.
    await page.locator('[data-embed="failed"]').waitFor();
    await expect(page.getByRole("button", { name: "Copy embed code" }).count()).resolves.toBe(0);
    const details = page.locator(".failure details");
    await expect(details.getAttribute("open")).resolves.toBeNull();
    await details.locator("summary").click();
    await expect(details.locator("pre").isVisible()).resolves.toBe(true);
    await screenshot(page, "video-failed");

    await page.getByRole("button", { name: "Delete video" }).click();
    const confirm = page.getByRole("dialog", { name: "Delete video" });
    await expect(confirm.textContent()).resolves.toContain("Broken");
    await confirm.getByRole("button", { name: "Delete video" }).click();
    await page.waitForURL(`**/console/libraries/${libraryId}`);
    await page.getByRole("link", { name: "Secret (final cut)" }).waitFor();
    await expect(page.getByRole("link", { name: "Broken" }).count()).resolves.toBe(0);
    const gone = await app.request("GET", `/v1/media/libraries/${libraryId}/videos/${brokenId}`);
    expect(gone.status).toBe(404);
  });

  it("keeps an emptied subtitle title in the dialog with the API's error, not the old title", async () => {
    await page.goto(`/console/libraries/${libraryId}/videos/${videoId}`);
    await addSubtitle(page, workDir, "English");
    await page.getByRole("button", { name: "Edit English" }).click();
    const editing = page.getByRole("dialog", { name: "Edit subtitle" });
    await editing.getByLabel("Title").fill("");
    await editing.getByRole("button", { name: "Save subtitle" }).click();
    await editing.locator('[data-field-error="title"]').waitFor();
    await expect(editing.isVisible()).resolves.toBe(true);
    await screenshot(page, "subtitle-title-required");
    await editing.getByRole("button", { name: "Cancel" }).click();
    await page.getByRole("rowheader", { name: "English" }).waitFor();
  });

  it("keeps the chosen folder, the library filters and the analytics pickers in the address", async () => {
    const folder = await app.request("POST", `/v1/media/libraries/${libraryId}/folders`, {
      json: { name: "Trailers" },
    });
    const folderId: string = folder.body.data.id;
    await page.goto(`/console/libraries/${libraryId}`);
    const folders = page.getByRole("navigation", { name: "Folders" });
    await folders.getByRole("button", { name: "Trailers" }).click();
    await page.waitForURL(`**/console/libraries/${libraryId}?folder=${folderId}`);
    await page.reload();
    await page.getByLabel("New folder in Trailers").waitFor();
    await expect(
      folders.getByRole("button", { name: "Trailers" }).getAttribute("aria-current"),
    ).resolves.toBe("true");
    // Back returns to the folder chosen before: all videos.
    await page.goBack();
    await page.waitForURL(`**/console/libraries/${libraryId}`);
    await page.getByLabel("New folder", { exact: true }).waitFor();

    await page.goto("/console/libraries");
    await page.getByLabel("Name contains").fill("films");
    await page.getByLabel("Default privacy").selectOption("private");
    await page.waitForURL("**/console/libraries?search=films&privacy=private");
    await page.reload();
    await page.getByRole("link", { name: "Private films" }).waitFor();
    await expect(page.getByLabel("Name contains").inputValue()).resolves.toBe("films");
    await expect(page.getByLabel("Default privacy").inputValue()).resolves.toBe("private");
    await page.getByRole("link", { name: "Private films" }).click();
    await page.waitForURL(`**/console/libraries/${libraryId}`);
    await page.goBack();
    await page.getByRole("link", { name: "Private films" }).waitFor();
    await expect(page.getByLabel("Name contains").inputValue()).resolves.toBe("films");

    await page.goto("/console/cdn/analytics");
    await page.getByRole("option", { name: LONG_HOST }).waitFor({ state: "attached" });
    await page.getByLabel("Range").selectOption("7d");
    await page.getByLabel("Granularity").selectOption("1d");
    await page.getByLabel("Distribution").selectOption(LONG_HOST);
    await page.waitForURL(`**/console/cdn/analytics?range=7d&granularity=1d&distribution=${LONG_HOST}`);
    await page.reload();
    await page.getByRole("option", { name: LONG_HOST }).waitFor({ state: "attached" });
    await expect(page.getByLabel("Range").inputValue()).resolves.toBe("7d");
    await expect(page.getByLabel("Granularity").inputValue()).resolves.toBe("1d");
    await expect(page.getByLabel("Distribution").inputValue()).resolves.toBe(LONG_HOST);
  });

  it("keeps a table's actions in reach at 375 px", async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    await page.goto("/console/libraries");
    const remove = page.getByRole("button", { name: "Delete Private films" });
    await remove.waitFor();
    // Each row is a card as wide as the panel: nothing scrolls sideways, the actions at its foot.
    await expect(page.locator(".table-overflowing").count()).resolves.toBe(0);
    const box = await remove.boundingBox();
    expect(box).not.toBeNull();
    expect((box?.x ?? 0) + (box?.width ?? 0)).toBeLessThanOrEqual(375);
    await expect(pageWidth(page)).resolves.toBeLessThanOrEqual(375);
    await screenshot(page, "libraries-phone");
    await remove.click();
    const confirm = page.getByRole("dialog", { name: "Delete library" });
    await confirm.getByRole("button", { name: "Cancel" }).click();
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it("reports the API's errors of a password change beside their fields", async () => {
    await page.goto("/console/account");
    await page.getByLabel("Current password").fill("not the password");
    await page.getByLabel("New password").fill("short");
    await page.getByRole("button", { name: "Change password" }).click();
    // Both wrong: both reported at once.
    await page.locator('[data-field-error="new_password"]').waitFor();
    await page.locator('[data-field-error="current_password"]').waitFor();
    await page.getByLabel("New password").fill("a long enough passphrase");
    await page.getByRole("button", { name: "Change password" }).click();
    await page.locator('[data-field-error="current_password"]').waitFor();
    await expect(page.locator('[data-field-error="new_password"]').count()).resolves.toBe(0);
  });

  it("keeps the library page and CDN analytics within a 375 px phone", async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    await page.goto(`/console/libraries/${libraryId}`);
    await page.getByRole("link", { name: "Secret (final cut)" }).waitFor();
    await expect(pageWidth(page)).resolves.toBeLessThanOrEqual(375);
    // Folders, upload and videos in one column.
    const left = async (name: string) =>
      (await page.getByRole("heading", { name, level: 2 }).boundingBox())?.x ?? Number.NaN;
    expect(await left("Upload a video")).toBe(await left("Folders"));
    expect(await left("Videos")).toBe(await left("Folders"));
    await screenshot(page, "library-phone");
    await page.goto("/console/cdn/analytics");
    await page.getByRole("option", { name: LONG_HOST }).waitFor({ state: "attached" });
    await expect(pageWidth(page)).resolves.toBeLessThanOrEqual(375);
    await screenshot(page, "cdn-analytics-phone");
    // A long name without spaces wraps instead of widening the page.
    const longName = `Quarterly-all-hands-recordings-${"y".repeat(60)}`;
    const long = await app.request("POST", "/v1/media/libraries", { json: { name: longName } });
    await page.goto(`/console/libraries/${long.body.data.id}`);
    await page.getByRole("heading", { name: longName, level: 1 }).waitFor();
    await expect(pageWidth(page)).resolves.toBeLessThanOrEqual(375);
    await screenshot(page, "library-long-name-phone");
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it("says a library or video that does not exist was not found, with a way back instead of Try again", async () => {
    for (const path of ["00000000-0000-4000-8000-000000000000", "not-a-library"]) {
      await page.goto(`/console/libraries/${path}`);
      await page.getByRole("heading", { name: "Library not found", level: 1 }).waitFor();
      await page.getByRole("link", { name: "Go to your libraries" }).waitFor();
      await expect(page.getByRole("button", { name: "Try again" }).count()).resolves.toBe(0);
    }
    await screenshot(page, "library-not-found");
    await page.goto(`/console/libraries/${libraryId}/videos/00000000-0000-4000-8000-000000000000`);
    await page.getByRole("heading", { name: "Video not found", level: 1 }).waitFor();
    await page.getByRole("link", { name: "Go to the library" }).click();
    await page.waitForURL(`**/console/libraries/${libraryId}`);
  });

  it("says a library in the players address does not exist, with New player disabled", async () => {
    await page.goto("/console/players?library=00000000-0000-4000-8000-000000000000");
    await expect(page.locator("[data-library-missing]").textContent()).resolves.toContain(
      "Library not found",
    );
    // The picker reads the library on its own: its option says so once that answer is in too.
    await page
      .getByLabel("Library")
      .locator("option:checked", { hasText: "Library not found" })
      .waitFor({ state: "attached" });
    await expect(page.getByRole("button", { name: "New player" }).isDisabled()).resolves.toBe(true);
  });

  it("answers Page not found for unknown addresses under CDN, cloud and webhooks", async () => {
    for (const path of ["/console/cdn/anything", "/console/cloud/anything", "/console/webhooks/anything"]) {
      await page.goto(path);
      await page.getByRole("heading", { name: "Page not found", level: 1 }).waitFor();
      await expect(page.getByRole("navigation", { name: /sections/ }).count()).resolves.toBe(0);
    }
  });

  it("reads the invitation token again when only the fragment changes", async () => {
    const guest = await browser.newContext({ baseURL: app.baseUrl });
    const invite = await guest.newPage();
    await invite.goto("/console/invite");
    await invite.getByText("This link has no invitation token").waitFor();
    await invite.evaluate(() => {
      (globalThis as any).location.hash = "some-token";
    });
    await invite.getByLabel("New password").waitFor();
    await guest.close();
  });

  it("leads to sign-in when the session ended in another tab, and back to the page after", async () => {
    await page.goto(`/console/libraries/${libraryId}`);
    await page.getByRole("link", { name: "Secret (final cut)" }).waitFor();
    // Another tab changes the password: every session of the user ends, this tab's too.
    const other = await signInApi(app, EMAIL);
    const changed = await app.request("PUT", "/v1/console/password", {
      ...withSession(other),
      json: { current_password: PASSWORD, new_password: "a brand new passphrase" },
    });
    expect(changed.status).toBeLessThan(300);
    await page.getByRole("main").getByRole("link", { name: "Players" }).click();
    await page.waitForURL("**/console/sign-in");
    await page.getByText("Your session has ended").waitFor();
    await expect(page.getByText(EMAIL).count()).resolves.toBe(0);
    await signInHere(page, "a brand new passphrase");
    await page.waitForURL(`**/console/players?library=${libraryId}`);
  });

  it("breaks none of the console's Content-Security-Policy on these pages", () => {
    expect(policyViolations).toEqual([]);
  });
});
