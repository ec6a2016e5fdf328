import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import type { BrowserContext, Page, Route } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { waitUntilActive } from "../media/helpers.ts";
import { freePort, pageWidth, policyViolations, screenshot } from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";
import { videosInLibrary } from "../support/console-uploads.ts";
import { waitUntil } from "../support/wait.ts";

const EMAIL = "robust@example.invalid";
const MiB = 1024 * 1024;
/** The server's source limit in this file: small, so a "too large" file is quick to make. */
const MAX_VIDEO_BYTES = 12 * MiB;
/** More libraries than the players page's picker lists at once (100) and than one list page (20). */
const BULK_LIBRARIES = 101;
const LONG_NAME = `Quarterly-all-hands-recordings-${"x".repeat(140)}`;

/** Whether leaving the page now would ask first (a `beforeunload` listener cancels the event). */
const asksBeforeLeaving = (page: Page) =>
  page.evaluate(() => {
    const event = new Event("beforeunload", { cancelable: true });
    (globalThis as any).window.dispatchEvent(event);
    return event.defaultPrevented;
  });

describeInBrowser("the console in Chromium: saving, failing and navigating safely", () => {
  let app: ConsoleApp;
  let context: BrowserContext;
  let page: Page;
  let workDir: string;
  let uploadsId: string;
  const bulk: { id: string; name: string }[] = [];

  const createLibrary = async (name: string, extra: Record<string, unknown> = {}) => {
    const answer = await app.request("POST", "/v1/media/libraries", { json: { name, ...extra } });
    expect(answer.status).toBe(201);
    return answer.body.data.id as string;
  };
  const videosOf = (libraryId: string) => videosInLibrary(app, libraryId);
  const fileOf = (name: string, bytes: number) => {
    const path = `${workDir}/${name}`;
    writeFileSync(path, randomBytes(bytes));
    return path;
  };

  beforeAll(async () => {
    workDir = mkdtempSync(`${tmpdir()}/cumulo-console-robust-`);
    app = await startConsoleApp(
      { CUMULO_EDGE_PORT: String(await freePort()), CUMULO_MAX_VIDEO_BYTES: String(MAX_VIDEO_BYTES) },
      { users: [{ email: EMAIL }] },
    );
    for (let index = 0; index < BULK_LIBRARIES; index += 1) {
      const name = `Bulk ${String(index).padStart(3, "0")}`;
      bulk.push({ id: await createLibrary(name), name });
    }
    uploadsId = await createLibrary("Uploads", { default_privacy: "public" });
    await waitUntilActive(app, uploadsId);
    ({ context, page } = await app.launch(EMAIL));
  }, 180_000);
  afterAll(async () => {
    await app?.close();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it("saves the video privacy on every save, not only the first, and shows what the server saved", async () => {
    const privacyOnServer = async () =>
      (await app.request("GET", `/v1/media/libraries/${uploadsId}/security`)).body.data.video_privacy;
    expect(await privacyOnServer()).toBe("public");
    await page.goto(`/console/libraries/${uploadsId}`);
    const privacy = page.getByLabel("Video privacy");
    const save = async (value: string) => {
      await privacy.selectOption(value);
      await page.getByRole("button", { name: "Save security settings" }).click();
      await page.getByRole("status").filter({ hasText: "Security settings saved." }).waitFor();
      await waitUntil(async () => (await privacyOnServer()) === value, 5_000, `privacy ${value} saved`);
      await expect(privacy.inputValue()).resolves.toBe(value);
    };
    await save("private");
    // Back to the value the page opened with: the form compares with the last save, not the load.
    await save("public");
    await save("private");
  });

  it("keeps the frame and offers a reload when a page's code cannot be loaded, and recovers elsewhere", async () => {
    const refuse = (route: Route) => route.abort("connectionfailed");
    await page.route("**/console/assets/AccountPage-*.js", refuse);
    try {
      await page.goto("/console/libraries");
      await page.getByRole("heading", { name: "Libraries", level: 1 }).waitFor();
      await page.getByRole("link", { name: EMAIL }).click();
      await page.getByRole("heading", { name: "This page could not be loaded", level: 1 }).waitFor();
      await page.getByRole("button", { name: "Reload" }).waitFor();
      // The frame is still there: the menu works.
      await expect(page.getByRole("navigation", { name: "Main" }).isVisible()).resolves.toBe(true);
      await screenshot(page, "page-could-not-be-loaded");
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Libraries" }).click();
      await page.getByRole("heading", { name: "Libraries", level: 1 }).waitFor();
      await expect(page.getByText("This page could not be loaded").count()).resolves.toBe(0);
      await page.getByRole("link", { name: EMAIL }).click();
      await page.getByRole("button", { name: "Reload" }).waitFor();
    } finally {
      await page.unroute("**/console/assets/AccountPage-*.js", refuse);
    }
    // Reload loads the whole console again, chunks included.
    await page.getByRole("button", { name: "Reload" }).click();
    await page.getByRole("heading", { name: "Your account", level: 1 }).waitFor();
  });

  it("leaves a person who went elsewhere during an upload where they are, and asks before closing the tab meanwhile", async () => {
    await page.goto(`/console/libraries/${uploadsId}`);
    await page.getByRole("heading", { name: "Uploads", level: 1 }).waitFor();
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const hold = async (route: Route) => {
      if (route.request().method() === "PATCH") await held;
      await route.continue();
    };
    await page.route("**/v1/media/tus/**", hold);
    try {
      await expect(asksBeforeLeaving(page)).resolves.toBe(false);
      await page.getByLabel("Title").fill("Left behind");
      await page.getByLabel("Video file").setInputFiles(fileOf("small.bin", 200_000));
      await page.getByRole("button", { name: "Upload" }).click();
      await page.getByLabel("Upload progress").waitFor();
      await waitUntil(async () => asksBeforeLeaving(page), 5_000, "the tab asks before closing");
      // Elsewhere in the console, typing into a dialog, while the bytes are on their way.
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "API keys" }).click();
      await page.getByRole("button", { name: "New API key" }).click();
      const dialog = page.getByRole("dialog", { name: "New API key" });
      await dialog.getByLabel("Name", { exact: true }).fill("typed during the upload");
      const patched = page.waitForResponse(
        (response) => response.request().method() === "PATCH" && response.url().includes("/v1/media/tus/"),
      );
      release();
      expect((await patched).status()).toBe(204);
      // The upload went on to the end.
      await waitUntil(
        async () =>
          (await videosOf(uploadsId)).some(
            (video) => video.title === "Left behind" && video.status !== "created",
          ),
        10_000,
        "the upload finished",
      );
      await waitUntil(async () => !(await asksBeforeLeaving(page)), 5_000, "the tab no longer asks");
      await page.waitForTimeout(500);
      expect(new URL(page.url()).pathname).toBe("/console/keys");
      await expect(dialog.isVisible()).resolves.toBe(true);
      await expect(dialog.getByLabel("Name", { exact: true }).inputValue()).resolves.toBe(
        "typed during the upload",
      );
      await dialog.getByRole("button", { name: "Cancel" }).click();
    } finally {
      release();
      await page.unroute("**/v1/media/tus/**", hold);
    }
  });

  it("refuses a file over the server's limit before making a video for it", async () => {
    const before = (await videosOf(uploadsId)).length;
    await page.goto(`/console/libraries/${uploadsId}`);
    await page.getByText("At most 12 MB").waitFor();
    await page.getByLabel("Title").fill("Too big");
    await page.getByLabel("Video file").setInputFiles(fileOf("big.bin", MAX_VIDEO_BYTES + 1));
    const message = page.locator('[data-field-error="file"]');
    await expect(message.textContent()).resolves.toBe("The file is larger than the 12 MB limit.");
    await page.getByRole("button", { name: "Upload" }).click();
    await message.waitFor();
    await page.waitForTimeout(500);
    await expect(page.getByLabel("Upload progress").count()).resolves.toBe(0);
    expect((await videosOf(uploadsId)).length).toBe(before);
    expect((await videosOf(uploadsId)).some((video) => video.title === "Too big")).toBe(false);
    await screenshot(page, "upload-too-large");
  });

  it("says in plain words why tus refused an upload and keeps no empty video", async () => {
    await page.goto(`/console/libraries/${uploadsId}`);
    await page.getByRole("heading", { name: "Uploads", level: 1 }).waitFor();
    // A server that refuses the length itself (its limit lowered since the page read it).
    const refuse = async (route: Route) => {
      if (route.request().method() !== "POST") return route.continue();
      return route.fulfill({
        status: 413,
        headers: {
          "content-type": "text/plain",
          "tus-resumable": "1.0.0",
          "access-control-allow-origin": "*",
        },
        body: "Maximum size exceeded\n",
      });
    };
    await page.route("**/v1/media/tus", refuse);
    try {
      await page.getByLabel("Title").fill("Refused by tus");
      await page.getByLabel("Video file").setInputFiles(fileOf("refused.bin", 100_000));
      await page.getByRole("button", { name: "Upload" }).click();
      const alert = page.getByRole("alert").filter({ hasText: "larger than the 12 MB limit" });
      await alert.waitFor();
      const text = (await alert.textContent()) ?? "";
      expect(text).toContain("The file is larger than the 12 MB limit.");
      expect(text).not.toMatch(/tus:|response code|originated from request/);
      await screenshot(page, "upload-refused-413");
    } finally {
      await page.unroute("**/v1/media/tus", refuse);
    }
    // The video this attempt made got none of the file: it is not kept, and the list agrees.
    await waitUntil(
      async () => !(await videosOf(uploadsId)).some((video) => video.title === "Refused by tus"),
      5_000,
      "the empty video removed",
    );
    await expect(page.getByRole("link", { name: "Refused by tus" }).count()).resolves.toBe(0);
  });

  it("lists a video whose upload broke off after part of the file arrived, with a plain message", async () => {
    await page.goto(`/console/libraries/${uploadsId}`);
    await page.getByRole("heading", { name: "Uploads", level: 1 }).waitFor();
    let patches = 0;
    // The first chunk (8 MiB) arrives; then the network goes.
    const breakOff = async (route: Route) => {
      if (route.request().method() === "PATCH" && ++patches > 1) return route.abort("connectionreset");
      return route.continue();
    };
    await page.route("**/v1/media/tus/**", breakOff);
    try {
      await page.getByLabel("Title").fill("Broke off");
      await page.getByLabel("Video file").setInputFiles(fileOf("partial.bin", 9 * MiB));
      await page.getByRole("button", { name: "Upload" }).click();
      const alert = page.getByRole("alert").filter({ hasText: "connection to the server was lost" });
      await alert.waitFor({ timeout: 30_000 });
      expect((await alert.textContent()) ?? "").not.toMatch(/tus:|response code/);
    } finally {
      await page.unroute("**/v1/media/tus/**", breakOff);
    }
    // The list was read again: it shows the video the server has, and its upload is offered to resume.
    await page.getByRole("region", { name: "Videos" }).getByRole("link", { name: "Broke off" }).waitFor();
    expect((await videosOf(uploadsId)).some((video) => video.title === "Broke off")).toBe(true);
    const unfinished = page.getByRole("region", { name: "Unfinished uploads" });
    await unfinished.locator(`[data-upload-offset="${8 * MiB}"]`).waitFor();
    await unfinished.getByRole("button", { name: "Resume upload" }).waitFor();
    await screenshot(page, "upload-broke-off");
  });

  it("starts a folder's videos at their first page", async () => {
    const libraryId = bulk[0]?.id ?? "";
    const folder = await app.request("POST", `/v1/media/libraries/${libraryId}/folders`, {
      json: { name: "Few" },
    });
    const folderId: string = folder.body.data.id;
    for (let index = 0; index < 41; index += 1) {
      await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
        json: { title: `Clip ${index}` },
      });
    }
    for (let index = 0; index < 3; index += 1) {
      await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
        json: { title: `Few ${index}`, folder_id: folderId },
      });
    }
    await page.goto(`/console/libraries/${libraryId}`);
    const pager = page.getByRole("navigation", { name: "Videos pages" });
    await pager.getByRole("button", { name: "Next" }).click();
    await pager.getByText("Page 2 of 3").waitFor();
    await pager.getByRole("button", { name: "Next" }).click();
    await pager.getByText("Page 3 of 3").waitFor();
    await page.getByRole("navigation", { name: "Folders" }).getByRole("button", { name: "Few" }).click();
    await page.waitForURL(`**/console/libraries/${libraryId}?folder=${folderId}`);
    for (let index = 0; index < 3; index += 1) {
      await page.getByRole("link", { name: `Few ${index}` }).waitFor();
    }
    await expect(page.getByText("No videos here yet.").count()).resolves.toBe(0);
  });

  it("lets any library be picked on the players page, past the first 100", async () => {
    // The picker lists 100 at a time: a library past the first 100 is found by searching.
    const second = await app.request("GET", "/v1/media/libraries?limit=100&page=2");
    const beyond: { id: string; name: string } = second.body.data[0];
    expect(beyond).toBeDefined();
    await page.goto("/console/players");
    const picker = page.getByLabel("Library", { exact: true });
    await picker.waitFor();
    await expect(picker.locator("option", { hasText: beyond.name }).count()).resolves.toBe(0);
    await page.getByLabel("Search libraries").fill(beyond.name);
    await picker.locator("option", { hasText: beyond.name }).waitFor({ state: "attached" });
    await picker.selectOption(beyond.id);
    await page.waitForURL(`**/console/players?library=${beyond.id}`);
    await page.getByText("This library has no players yet.").waitFor();
    await page.reload();
    // The chosen library is named once its row has loaded (its id stands in until then).
    await picker.locator("option:checked", { hasText: beyond.name }).waitFor({ state: "attached" });
    await expect(picker.locator("option:checked").textContent()).resolves.toBe(beyond.name);
  });

  it("goes to the last page with rows from a page past the end, and Back returns to the page before", async () => {
    // 101 bulk libraries and Uploads: 6 pages of 20.
    await page.goto("/console/libraries?page=99");
    await page.waitForURL("**/console/libraries?page=6");
    const pager = page.getByRole("navigation", { name: "Libraries pages" });
    await pager.getByText("Page 6 of 6").waitFor();
    await expect(page.getByText("No libraries yet.").count()).resolves.toBe(0);
    await pager.getByRole("button", { name: "Previous" }).click();
    await page.waitForURL("**/console/libraries?page=5");
    await pager.getByText("Page 5 of 6").waitFor();
    await page.goBack();
    await page.waitForURL("**/console/libraries?page=6");
    await pager.getByText("Page 6 of 6").waitFor();
    // Deleting the only library of the last page: the list shows the page before, not "No libraries".
    const last = page.getByRole("rowheader");
    await expect(last.count()).resolves.toBe(2);
    const names = await last.allTextContents();
    for (const name of names) {
      await page.getByRole("button", { name: `Delete ${name}` }).click();
      const confirm = page.getByRole("dialog", { name: "Delete library" });
      await confirm.getByRole("button", { name: "Delete library" }).click();
      await confirm.waitFor({ state: "hidden" });
    }
    await page.waitForURL("**/console/libraries?page=5");
    await pager.getByText("Page 5 of 5").waitFor();
    await expect(page.getByText("No libraries yet.").count()).resolves.toBe(0);
  });

  it("wraps a long name without spaces inside its cell instead of widening the table", async () => {
    await app.request("POST", "/v1/media/libraries", { json: { name: LONG_NAME } });
    await page.goto(`/console/libraries?search=${LONG_NAME.slice(0, 20)}`);
    const remove = page.getByRole("button", { name: `Delete ${LONG_NAME}` });
    await remove.waitFor();
    await expect(page.locator(".table-overflowing").count()).resolves.toBe(0);
    const box = await remove.boundingBox();
    expect((box?.x ?? 0) + (box?.width ?? 0)).toBeLessThanOrEqual(1280);
    // The other columns keep their width: the row's buttons stay side by side.
    const edit = await page.getByRole("button", { name: `Edit ${LONG_NAME}` }).boundingBox();
    expect(edit?.y).toBe(box?.y);
    await expect(pageWidth(page)).resolves.toBeLessThanOrEqual(1280);
    await screenshot(page, "libraries-long-name");
  });

  it("closes the phone menu with Escape and puts the focus back on its button", async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    try {
      await page.goto("/console/libraries");
      const menu = page.getByRole("button", { name: "Menu" });
      await menu.click();
      await expect(menu.getAttribute("aria-expanded")).resolves.toBe("true");
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Players" }).focus();
      await page.keyboard.press("Escape");
      await expect(menu.getAttribute("aria-expanded")).resolves.toBe("false");
      await expect(
        page.evaluate(() => (globalThis as any).document.activeElement?.textContent),
      ).resolves.toBe("Menu");
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });

  it("offers Try again, not sign-in, when the session cannot be checked", async () => {
    let refused = 0;
    const unavailable = (route: Route) => {
      if (route.request().method() !== "GET") return route.continue();
      refused += 1;
      return route.fulfill({
        status: 503,
        contentType: "application/json",
        body: JSON.stringify({ success: false, message: "The service is unavailable" }),
      });
    };
    await page.route("**/v1/console/session", unavailable);
    try {
      await page.goto("/console/libraries");
      await page.locator("[data-session-check-failed]").waitFor();
      await expect(page.getByRole("alert").textContent()).resolves.toContain("The service is unavailable");
      expect(new URL(page.url()).pathname).toBe("/console/libraries");
      await screenshot(page, "session-check-failed");
      await page.getByRole("button", { name: "Try again" }).click();
      await waitUntil(async () => refused >= 2, 5_000, "checked again");
      await page.locator("[data-session-check-failed]").waitFor();
    } finally {
      await page.unroute("**/v1/console/session", unavailable);
    }
    await page.getByRole("button", { name: "Try again" }).click();
    await page.getByRole("heading", { name: "Libraries", level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/console/libraries");
  });

  it("says a session that ended (here: removed on the server) has ended, without guessing why", async () => {
    await page.goto("/console/libraries");
    await page.getByRole("heading", { name: "Libraries", level: 1 }).waitFor();
    const cookie = (await context.cookies()).find((item) => item.name === "cumulo_session");
    expect(cookie).toBeDefined();
    const session = await app.request("GET", "/v1/console/session", {
      anonymous: true,
      headers: { cookie: `cumulo_session=${cookie?.value}` },
    });
    const ended = await app.request("DELETE", "/v1/console/session", {
      anonymous: true,
      headers: { cookie: `cumulo_session=${cookie?.value}`, "x-csrf-token": session.body.data.csrf_token },
    });
    expect(ended.status).toBe(204);
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Players" }).click();
    await page.waitForURL("**/console/sign-in");
    const notice = page.getByRole("status").filter({ hasText: "Your session has ended" });
    await expect(notice.textContent()).resolves.toBe("Your session has ended. Sign in again.");
  });

  it("breaks none of the console's Content-Security-Policy on these pages", () => {
    expect(policyViolations).toEqual([]);
  });
});
