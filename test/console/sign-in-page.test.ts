import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { browserMissing, launchBrowser, newConsoleContext, screenshot } from "../support/browser.ts";

const missing = browserMissing();
if (missing) console.warn(missing);

describe.skipIf(missing)("the console in Chromium: the page frame", () => {
  let app: TestApp;
  let browser: Browser;

  beforeAll(async () => {
    app = await startTestApp();
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it("sends a visitor without a session to the sign-in page, labelled and usable with the keyboard", async () => {
    const context = await newConsoleContext(browser, app.baseUrl);
    const page = await context.newPage();
    await page.goto("/console/libraries");
    await page.waitForURL("**/console/sign-in");
    await expect(page.getByRole("heading", { name: "Sign in to Cumulo" }).isVisible()).resolves.toBe(true);
    // Tab reaches the fields by their labels and the button.
    await page.keyboard.press("Tab");
    await expect(page.evaluate("document.activeElement?.getAttribute('type')")).resolves.toBe("email");
    await page.getByLabel("Email").fill("nobody@example.invalid");
    await page.getByLabel("Password").fill("wrong-password-123");
    await screenshot(page, "sign-in");
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, "sign-in-phone");
    await context.close();
  });

  it("loads at most 250 KB of compressed JavaScript on the first page", async () => {
    const context = await newConsoleContext(browser, app.baseUrl);
    const page = await context.newPage();
    const scripts: Promise<number>[] = [];
    page.on("requestfinished", (request) => {
      // The bytes on the wire: the body as sent, compressed.
      if (request.resourceType() === "script")
        scripts.push(request.sizes().then((sizes) => sizes.responseBodySize));
    });
    await page.goto("/console/sign-in", { waitUntil: "networkidle" });
    const bytes = (await Promise.all(scripts)).reduce((sum, size) => sum + size, 0);
    console.log(`first page: ${scripts.length} scripts, ${(bytes / 1024).toFixed(1)} KB compressed`);
    expect(scripts.length).toBeGreaterThan(0);
    expect(bytes).toBeLessThanOrEqual(250 * 1024);
    await context.close();
  });
});
