import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, it } from "vitest";
import { waitUntilActive } from "../media/helpers.ts";
import { freePort, screenshot } from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";
import { generateClip } from "../support/media.ts";

const EMAIL = "origin@example.invalid";

/**
 * An upload authorization's endpoint names the origin the API was asked under (or
 * CUMULO_PUBLIC_URL); behind a proxy that forwards `Host` without its port it names an address the
 * browser cannot reach, and the console's uploads failed there (regression QA of 4 December, session
 * 41). The console sends its uploads to its own origin, as all its other calls: here the endpoint names
 * a port nothing listens on.
 */
describeInBrowser("the console in Chromium: uploads at its own origin", () => {
  let app: ConsoleApp;
  let page: Page;
  let workDir: string;
  let libraryId: string;

  beforeAll(async () => {
    workDir = mkdtempSync(`${tmpdir()}/cumulo-console-origin-`);
    app = await startConsoleApp(
      {
        CUMULO_EDGE_PORT: String(await freePort()),
        CUMULO_PUBLIC_URL: `http://127.0.0.1:${await freePort()}`,
      },
      { users: [{ email: EMAIL }] },
    );
    const library = await app.request("POST", "/v1/media/libraries", { json: { name: "Proxied" } });
    libraryId = library.body.data.id;
    await waitUntilActive(app, libraryId);
    ({ page } = await app.launch(EMAIL));
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  it("uploads a video though the authorization's endpoint names another origin", async () => {
    const clip = await generateClip(workDir, { seconds: 2, width: 160, height: 90 });
    await page.goto(`/console/libraries/${libraryId}`);
    await page.getByRole("heading", { name: "Proxied", level: 1 }).waitFor();
    await page.getByLabel("Title").fill("Through the proxy");
    await page.getByLabel("Video file").setInputFiles(clip);
    await page.getByRole("button", { name: "Upload", exact: true }).click();
    await page.waitForURL("**/videos/**", { timeout: 30_000 }).catch(async (error) => {
      await screenshot(page, "upload-origin-failed");
      throw error;
    });
    await page.locator('[data-processing-status="ready"]').waitFor({ timeout: 90_000 });
  });
});
