import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { addSubtitle, freePort, policyViolations, screenshot, signInInBrowser } from "../support/browser.ts";
import {
  type ConsoleApp,
  describeInBrowser,
  openConsole,
  startConsoleApp,
} from "../support/console-browser.ts";
import { generateClip } from "../support/media.ts";

/** A request from inside the page, with the browser's own session cookie. */
function fetchInPage(page: Page, method: string, path: string, headers: Record<string, string> = {}) {
  return page.evaluate(
    async ({ method, path, headers }) => {
      const response = await fetch(path, {
        method,
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ name: "From the page" }),
      });
      return { status: response.status, body: (await response.json()) as { code?: string } };
    },
    { method, path, headers },
  );
}

describeInBrowser("the console in Chromium", () => {
  let app: ConsoleApp;
  let browser: Browser;
  let page: Page;
  let workDir: string;
  const email = "owner@example.invalid";
  const readerEmail = "reader@example.invalid";

  beforeAll(async () => {
    workDir = mkdtempSync(`${tmpdir()}/cumulo-console-e2e-`);
    app = await startConsoleApp(
      { CUMULO_EDGE_PORT: String(await freePort()) },
      { users: [{ email }, { email: readerEmail, readOnly: true }] },
    );
    ({ browser, page } = await app.launch());
  });
  afterAll(async () => {
    await app?.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  it("signs in and shows the organization in the frame", async () => {
    await signInInBrowser(page, email);
    await expect(page.getByRole("navigation", { name: "Main" }).isVisible()).resolves.toBe(true);
    await page.locator('[data-livestream-health="healthy"]').waitFor();
    await expect(page.getByText(email).isVisible()).resolves.toBe(true);
    await page.getByText("No libraries yet.").waitFor();
    await screenshot(page, "libraries-empty");
  });

  it("creates an API key, shows its secret once, and the key works against the API", async () => {
    await page.getByRole("link", { name: "API keys" }).click();
    await page.getByRole("button", { name: "New API key" }).click();
    const dialog = page.getByRole("dialog", { name: "New API key" });
    await dialog.getByLabel("Name", { exact: true }).fill("from the console");
    await dialog.getByRole("button", { name: "Create key" }).click();
    const secretDialog = page.getByRole("dialog", { name: /created/ });
    const secret = await secretDialog.getByLabel("API key").inputValue();
    expect(secret.length).toBeGreaterThan(20);
    await secretDialog.getByRole("button", { name: "Copy", exact: true }).click();
    await secretDialog.getByRole("button", { name: /^Cop(ied|y failed)/ }).waitFor();
    await screenshot(page, "api-key-secret");
    // Escape, even twice, does not throw the secret away: it leads to the button that closes.
    await page.keyboard.press("Escape");
    await page.keyboard.press("Escape");
    await expect(secretDialog.isVisible()).resolves.toBe(true);
    const copied = secretDialog.getByRole("button", { name: "I have copied it" });
    await expect(copied.evaluate((button) => button === button.ownerDocument.activeElement)).resolves.toBe(
      true,
    );
    await copied.click();
    await page.getByRole("rowheader", { name: "from the console" }).waitFor();
    await screenshot(page, "api-keys");
    // The list never shows the secret again.
    expect(await page.content()).not.toContain(secret);
    const response = await app.request("GET", "/v1/media/libraries", { key: secret });
    expect(response.status).toBe(200);
  });

  it("shows the API's field errors beside the field, then creates a library", async () => {
    await page.getByRole("link", { name: "Libraries" }).click();
    await page.getByRole("button", { name: "New library" }).click();
    const dialog = page.getByRole("dialog", { name: "New library" });
    await dialog.getByRole("button", { name: "Create library" }).click();
    // An empty name: the API's validation error appears under the Name field, as a sentence that
    // does not repeat the API's field path.
    await dialog.locator('[data-field-error="name"]', { hasText: "This field must not be empty." }).waitFor();
    await expect(dialog.getByLabel("Name", { exact: true }).getAttribute("aria-invalid")).resolves.toBe(
      "true",
    );
    await dialog.getByLabel("Name", { exact: true }).fill("Trailers");
    // What the privacy chosen here governs is said beside it (an edit's does not change playback).
    await expect(dialog.getByLabel("Default privacy").getAttribute("aria-describedby")).resolves.toBeTruthy();
    await dialog.getByText("Also who may play the library's videos at first").waitFor();
    await screenshot(page, "library-new");
    await dialog.getByRole("button", { name: "Create library" }).click();
    await page.getByRole("link", { name: "Trailers" }).click();
    await page.getByRole("heading", { name: "Trailers", level: 1 }).waitFor();
    await page.getByText("No videos here yet.").waitFor();
    // A bad referrer: the API's error appears beside the referrers' values, naming the line.
    const referrers = page.getByRole("group", { name: "Referrers" });
    await referrers.getByLabel("Values").fill("example.com\nnot a host!");
    await page.getByRole("button", { name: "Save security settings" }).click();
    await page
      .locator('[data-field-error="referrers.values"]', { hasText: "Line 2 has an invalid format." })
      .waitFor();
    // By the line it was typed on, past a blank line (QA of session 47: "Line 2" for line 4).
    await referrers.getByLabel("Values").fill("example.com\n\ncdn.example.com\nnot a host!");
    await page.getByRole("button", { name: "Save security settings" }).click();
    await page
      .locator('[data-field-error="referrers.values"]', { hasText: "Line 4 has an invalid format." })
      .waitFor();
    await referrers.getByLabel("Values").fill("example.com");
    await page.getByRole("button", { name: "Save security settings" }).click();
    await page
      .getByText("Security settings saved.")
      .waitFor()
      .catch(async (error) => {
        await screenshot(page, "security-failed");
        throw error;
      });
    await screenshot(page, "library");
  });

  it("uploads a generated video with progress, sees it reach ready, and plays it", async () => {
    const clip = await generateClip(workDir, { seconds: 3, width: 320, height: 180 });
    await page.getByLabel("Title").fill("Test pattern");
    await page.getByLabel("Video file").setInputFiles(clip);
    await page.getByRole("button", { name: "Upload" }).click();
    await page.waitForURL("**/videos/**", { timeout: 30_000 }).catch(async (error) => {
      await screenshot(page, "upload-failed");
      throw error;
    });
    await page
      .locator('[data-processing-status="ready"]')
      .waitFor({ timeout: 90_000 })
      .catch(async (error) => {
        await screenshot(page, "processing-failed");
        throw error;
      });
    const video = page.locator("video");
    await video.waitFor();
    // The viewer presses play (the library has no autoplaying player).
    await page
      .waitForFunction(
        () => ((globalThis as any).document.querySelector("video")?.readyState ?? 0) >= 2,
        undefined,
        {
          timeout: 30_000,
        },
      )
      .catch(async (error) => {
        await screenshot(page, "player-failed");
        throw error;
      });
    await video.evaluate((element: any) => element.play());
    await page.waitForFunction(
      () => {
        const element = (globalThis as any).document.querySelector("video");
        return element !== null && element.currentTime > 0.3;
      },
      undefined,
      { timeout: 30_000 },
    );
    await screenshot(page, "video");
  });

  it("adds, edits and deletes a subtitle of the video", async () => {
    await addSubtitle(page, workDir, "English");
    await page.getByRole("button", { name: "Edit English" }).click();
    const editing = page.getByRole("dialog", { name: "Edit subtitle" });
    await editing.getByLabel("Title").fill("English (CC)");
    await editing.getByRole("button", { name: "Save subtitle" }).click();
    await page.getByRole("rowheader", { name: "English (CC)" }).waitFor();
    await page.getByRole("button", { name: "Delete English (CC)" }).click();
    await page
      .getByRole("dialog", { name: "Delete subtitle" })
      .getByRole("button", { name: "Delete subtitle" })
      .click();
    await page.getByText("No subtitles yet.").waitFor();
  });

  it("creates players and marks one default", async () => {
    await page.getByRole("link", { name: "Players" }).click();
    for (const name of ["Brand", "Classic"]) {
      await page.getByRole("button", { name: "New player" }).click();
      const dialog = page.getByRole("dialog", { name: "New player" });
      await dialog.getByLabel("Name", { exact: true }).fill(name);
      await dialog.getByRole("button", { name: "Save player" }).click();
      await page.getByRole("rowheader", { name }).waitFor();
    }
    await page.getByRole("button", { name: "Mark default: Classic" }).click();
    await page
      .locator("button:disabled", { hasText: "Mark default" })
      .and(page.getByLabel("Mark default: Classic"))
      .waitFor();
    await expect(page.getByRole("button", { name: "Mark default: Brand" }).isEnabled()).resolves.toBe(true);
    await screenshot(page, "players");
  });

  it("refuses a cookie request without the CSRF token (403)", async () => {
    const refused = await fetchInPage(page, "POST", "/v1/media/libraries");
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("csrf_token_invalid");
  });

  it("signs out: the session ends and pages lead to sign-in", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL("**/console/sign-in");
    await page.goto("/console/keys");
    await page.waitForURL("**/console/sign-in");
    const after = await page.evaluate(async () => (await fetch("/v1/console/session")).status);
    expect(after).toBe(401);
  });

  it("lets a read-only user look at everything and change nothing", async () => {
    const { context: readerContext, page: reader } = await openConsole(browser, app.baseUrl, readerEmail);
    await reader.getByRole("link", { name: "Trailers" }).waitFor();
    await expect(reader.getByRole("button", { name: "New library" }).isDisabled()).resolves.toBe(true);
    await expect(reader.getByRole("button", { name: "Delete Trailers" }).isDisabled()).resolves.toBe(true);
    await reader.getByRole("link", { name: "API keys" }).click();
    await reader.getByRole("rowheader", { name: "from the console" }).waitFor();
    await expect(reader.getByRole("button", { name: "New API key" }).isDisabled()).resolves.toBe(true);
    await screenshot(reader, "api-keys-read-only");
    // The API says no as well, with a valid CSRF token.
    const csrf = await reader.evaluate(
      async () => ((await (await fetch("/v1/console/session")).json()) as any).data.csrf_token as string,
    );
    const refused = await fetchInPage(reader, "POST", "/v1/media/libraries", { "x-csrf-token": csrf });
    expect(refused.status).toBe(403);
    await reader.setViewportSize({ width: 390, height: 844 });
    await reader.getByRole("button", { name: "Menu" }).click();
    await screenshot(reader, "api-keys-phone-menu");
    await readerContext.close();
  });

  it("breaks none of the console's Content-Security-Policy on these pages", () => {
    expect(policyViolations).toEqual([]);
  });
});
