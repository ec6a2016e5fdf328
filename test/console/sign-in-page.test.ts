import type { Browser, Locator } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestApp } from "../support/app.ts";
import { policyViolations, screenshot, signInInBrowser } from "../support/browser.ts";
import { adminOrganizationId, createConsoleUser, PASSWORD } from "../support/console.ts";
import {
  type ConsoleApp,
  describeInBrowser,
  openConsole,
  startConsoleApp,
} from "../support/console-browser.ts";

describeInBrowser("the console in Chromium: the page frame", () => {
  let app: ConsoleApp;
  let browser: Browser;

  beforeAll(async () => {
    app = await startConsoleApp();
    browser = await app.launchBrowser();
  });
  afterAll(() => app?.close());

  it("sends a visitor without a session to the sign-in page, labelled and usable with the keyboard", async () => {
    const { context, page } = await openConsole(browser, app.baseUrl);
    await page.goto("/console/libraries");
    await page.waitForURL("**/console/sign-in");
    await expect(page.getByRole("heading", { name: "Sign in to Cumulo" }).isVisible()).resolves.toBe(true);
    // Tab reaches the fields by their labels and the button.
    await page.keyboard.press("Tab");
    await expect(page.evaluate("document.activeElement?.getAttribute('inputmode')")).resolves.toBe("email");
    await page.getByLabel("Email").fill("nobody@example.invalid");
    await page.getByLabel("Password").fill("wrong-password-123");
    // The heading stands as far above "Email" as the Email field stands above "Password" (it
    // touched the label).
    const boxOf = async (locator: Locator) =>
      (await locator.boundingBox()) ?? { x: 0, y: 0, width: 0, height: 0 };
    const heading = await boxOf(page.getByRole("heading", { name: "Sign in to Cumulo" }));
    const emailLabel = await boxOf(page.getByText("Email", { exact: true }));
    const emailInput = await boxOf(page.getByLabel("Email"));
    const passwordLabel = await boxOf(page.getByText("Password", { exact: true }));
    expect(emailLabel.y - (heading.y + heading.height)).toBeGreaterThanOrEqual(
      passwordLabel.y - (emailInput.y + emailInput.height),
    );
    await screenshot(page, "sign-in");
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, "sign-in-phone");
    await context.close();
  });

  // QA of 6 December (session 47): the email field's own check refused `ü` before the `@`.
  it("signs in a person whose email has accented letters, typed either way", async () => {
    await createConsoleUser(app, { email: "j\u00fcrgen@example.test" });
    for (const typed of ["j\u00fcrgen@example.test", "ju\u0308rgen@example.test"]) {
      const { context, page } = await openConsole(browser, app.baseUrl);
      await signInInBrowser(page, typed);
      await context.close();
    }
  });

  it("loads at most 250 KB of compressed JavaScript on the first page", async () => {
    const { context, page } = await openConsole(browser, app.baseUrl);
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

  it("takes an invited person from the link to a password, signed in, and changes the password on the account page", async () => {
    const created = await app.cumulo.services.console.createUser({
      organizationId: await adminOrganizationId(app),
      email: "invited@example.invalid",
      readOnly: false,
    });
    if (created.outcome !== "created" || !created.invitation_url) throw new Error("no invitation");
    const { context, page } = await openConsole(browser, app.baseUrl);
    await page.goto(`/console/invite${new URL(created.invitation_url).hash}`);
    await page.getByLabel("New password").fill(PASSWORD);
    await page.getByLabel("Repeat the password").fill(`${PASSWORD}-typo`);
    await page.getByRole("button", { name: "Set password and sign in" }).click();
    await expect(
      page
        .locator('[data-field-error="repeated"]')
        .filter({ hasText: "The two passwords differ." })
        .isVisible(),
    ).resolves.toBe(true);
    expect(new URL(page.url()).pathname).toBe("/console/invite");
    await page.getByLabel("Repeat the password").fill(PASSWORD);
    // Said of the passwords as they were: gone once one changes.
    await expect(page.locator('[data-field-error="repeated"]').count()).resolves.toBe(0);
    await screenshot(page, "invite");
    await page.getByRole("button", { name: "Set password and sign in" }).click();
    await page.waitForURL("**/console/libraries");
    // The session the invitation started is the console's own: a reload keeps it.
    await page.reload();
    await page.getByRole("heading", { name: "Libraries", level: 1 }).waitFor();

    await page.getByRole("link", { name: "invited@example.invalid" }).click();
    await page.waitForURL("**/console/account");
    await page.getByLabel("Current password").fill("not the password");
    await page.getByLabel("New password").fill("a brand new passphrase");
    await page.getByRole("button", { name: "Change password" }).click();
    await page.locator('[data-field-error="current_password"]').waitFor();
    await page.getByLabel("Current password").fill(PASSWORD);
    await page.getByRole("button", { name: "Change password" }).click();
    await page.getByRole("status").filter({ hasText: "Password changed" }).waitFor();
    await screenshot(page, "account");
    // The tab goes on with its fresh session (a write needs the fresh CSRF token too).
    await page.goto("/console/keys");
    await page.getByRole("heading", { name: "API keys" }).waitFor();
    await context.close();

    const signIn = (password: string) =>
      app.request("POST", "/v1/console/session", {
        anonymous: true,
        json: { email: "invited@example.invalid", password },
      });
    expect((await signIn(PASSWORD)).status).toBe(401);
    expect((await signIn("a brand new passphrase")).status).toBe(201);
  });

  it("tells a person refused by the sign-in limit how long to wait", async () => {
    const limited = await startTestApp({ CUMULO_SIGN_IN_RATE_LIMIT: "2/15m" });
    try {
      const { context, page } = await openConsole(browser, limited.baseUrl);
      await page.goto("/console/sign-in");
      for (let attempt = 0; attempt < 3; attempt++) {
        await page.getByLabel("Email").fill("guesser@example.invalid");
        await page.getByLabel("Password").fill(`guess number ${attempt}`);
        await page.getByRole("button", { name: "Sign in" }).click();
        await page.getByRole("alert").waitFor();
      }
      await page
        .getByRole("alert")
        .filter({ hasText: /Too many requests: try again in 1[45] minutes\./ })
        .waitFor();
      await context.close();
    } finally {
      await limited.close();
    }
  });

  it("breaks none of the console's Content-Security-Policy on these pages", () => {
    expect(policyViolations).toEqual([]);
  });
});
