import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { freePort, pageWidth, policyViolations, screenshot } from "../support/browser.ts";
import { createConsoleUser } from "../support/console.ts";
import {
  type ConsoleApp,
  describeInBrowser,
  openConsole,
  startConsoleApp,
} from "../support/console-browser.ts";
import { waitUntil } from "../support/wait.ts";

const EDITOR = "editor@example.invalid";
const READER = "reader@example.invalid";
/** An organization name longer than a phone's row, or than a tablet's bar. */
const ORGANIZATION = "Northern Lights Broadcasting Cooperative of the Baltic and Nordic Countries";

/** The top bar's height and whether anything in it is wider than the screen. */
const topBar = (page: Page) =>
  page.evaluate(() => {
    const bar = (globalThis as any).document.querySelector("header.topbar");
    const box = bar.getBoundingClientRect();
    return { height: box.height as number, overflows: bar.scrollWidth > bar.clientWidth };
  });

const visible = (page: Page, role: "button" | "link", name: string) =>
  page.getByRole(role, { name, exact: true }).isVisible();

/** The frame at a phone's, a tablet's and a laptop's width, and what a read-only user is shown. */
describeInBrowser("the console in Chromium: the frame on every screen and read-only users", () => {
  let app: ConsoleApp;
  let browser: Browser;
  let libraryId: string;
  let videoId: string;

  beforeAll(async () => {
    app = await startConsoleApp({ CUMULO_EDGE_PORT: String(await freePort()) });
    const organization = await app.createOrganization(ORGANIZATION);
    await createConsoleUser(app, { email: EDITOR, organizationId: organization.organizationId });
    await createConsoleUser(app, {
      email: READER,
      organizationId: organization.organizationId,
      readOnly: true,
    });
    const library = await app.request("POST", "/v1/media/libraries", {
      key: organization.key,
      json: { name: "Catalogue" },
    });
    expect(library.status).toBe(201);
    libraryId = library.body.data.id;
    await waitUntil(
      async () =>
        (await app.request("GET", `/v1/media/libraries/${libraryId}`, { key: organization.key })).body.data
          .status === "active",
      30_000,
      "the library provisioned",
    );
    const video = await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
      key: organization.key,
      json: { title: "Trailer" },
    });
    expect(video.status).toBe(201);
    videoId = video.body.data.id;
    browser = await app.launchBrowser();
  }, 120_000);
  afterAll(() => app?.close());

  it("keeps the top bar to one row on a phone, with the account and sign-out behind the menu", async () => {
    const { context, page } = await openConsole(browser, app.baseUrl, READER);
    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByRole("heading", { name: "Libraries", level: 1 }).waitFor();
    const closed = await topBar(page);
    // One row of controls (about 52 px), where it used to wrap into three (138 px).
    expect(closed.height).toBeLessThan(64);
    expect(closed.overflows).toBe(false);
    // The name cut short within the bar: its whole width had widened every page (QA of session 47).
    expect(await pageWidth(page)).toBe(390);
    await expect(page.getByText(ORGANIZATION).isVisible()).resolves.toBe(true);
    await expect(visible(page, "button", "Sign out")).resolves.toBe(false);
    await screenshot(page, "frame-phone");

    const menu = page.getByRole("button", { name: "Menu" });
    await menu.click();
    await expect(menu.getAttribute("aria-expanded")).resolves.toBe("true");
    for (const link of ["API keys", "Libraries", "Players", "Webhooks", "CDN", "Cloud", READER]) {
      await expect(visible(page, "link", link), link).resolves.toBe(true);
    }
    await expect(visible(page, "button", "Sign out")).resolves.toBe(true);
    await expect(page.locator("header").getByText("read-only", { exact: true }).isVisible()).resolves.toBe(
      true,
    );
    await expect(page.locator("[data-livestream-health]").isVisible()).resolves.toBe(true);
    await expect(
      page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth),
    ).resolves.toBeLessThanOrEqual(390);
    await screenshot(page, "frame-phone-menu");

    // The account link, in the part of the bar the menu opened, closes it and leads to the account.
    await page.getByRole("link", { name: READER }).click();
    await page.waitForURL("**/console/account");
    await page.locator('.menu-button[aria-expanded="false"]').waitFor();
    await expect((await topBar(page)).height).toBeLessThan(64);

    // Signing out from the phone's menu.
    await menu.click();
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL("**/console/sign-in");
    await context.close();
  });

  it("shows everything of the bar in one row at a tablet's and a laptop's width, without a menu", async () => {
    const { context, page } = await openConsole(browser, app.baseUrl, EDITOR);
    for (const [width, height] of [
      [800, 1000],
      [1280, 800],
    ] as const) {
      await page.setViewportSize({ width, height });
      const bar = await topBar(page);
      expect(bar.height, `at ${width} px`).toBeLessThan(64);
      expect(bar.overflows).toBe(false);
      expect(await pageWidth(page)).toBe(width);
      await expect(visible(page, "button", "Menu")).resolves.toBe(false);
      await expect(visible(page, "button", "Sign out")).resolves.toBe(true);
      await expect(visible(page, "link", EDITOR)).resolves.toBe(true);
      await expect(visible(page, "link", "Cloud")).resolves.toBe(true);
      await expect(page.getByText(ORGANIZATION).isVisible()).resolves.toBe(true);
      await expect(page.locator("[data-livestream-health]").isVisible()).resolves.toBe(true);
      await screenshot(page, `frame-${width}`);
    }
    await context.close();
  });

  it("shows the account link's focus ring in the bar, on a laptop and in the phone's menu", async () => {
    const { context, page } = await openConsole(browser, app.baseUrl, EDITOR);
    const account = page.getByRole("link", { name: EDITOR });
    /** How many pixels around the account link change when Tab gives it the focus. */
    const changedByFocus = async (tabs: number) => {
      const link = await account.boundingBox();
      if (!link) throw new Error("the account link is not shown");
      const clip = { x: link.x - 8, y: link.y - 8, width: link.width + 16, height: link.height + 16 };
      const before = await page.screenshot({ clip });
      for (let tab = 0; tab < tabs; tab++) await page.keyboard.press("Tab");
      await expect(account.evaluate((element) => element.matches(":focus-visible"))).resolves.toBe(true);
      const after = await page.screenshot({ clip });
      // Compared in a blank page: the console's Content-Security-Policy refuses data: images.
      const blank = await context.newPage();
      const changed = await blank.evaluate(
        async ([first, second]) => {
          // The test's TypeScript has no DOM types: the blank page's globals, untyped.
          const web = globalThis as any;
          const pixels = async (png: string): Promise<Uint8ClampedArray> => {
            const image = new web.Image();
            image.src = `data:image/png;base64,${png}`;
            await image.decode();
            const canvas = web.document.createElement("canvas");
            canvas.width = image.width;
            canvas.height = image.height;
            const drawing = canvas.getContext("2d");
            drawing.drawImage(image, 0, 0);
            return drawing.getImageData(0, 0, canvas.width, canvas.height).data;
          };
          const [a, b] = [await pixels(first), await pixels(second)];
          let count = 0;
          for (let at = 0; at < a.length; at += 4) {
            const difference =
              Math.abs(a[at] - b[at]) + Math.abs(a[at + 1] - b[at + 1]) + Math.abs(a[at + 2] - b[at + 2]);
            if (difference > 60) count++;
          }
          return count;
        },
        [before.toString("base64"), after.toString("base64")],
      );
      await blank.close();
      return { changed, width: link.width };
    };
    // The ring is 3 px wide all round the link; the box that cuts a long email short had hidden it.
    await page.goto("/console/libraries");
    const laptop = await changedByFocus(2); // the skip link, then the account link
    expect(laptop.changed).toBeGreaterThan(laptop.width * 4);
    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByRole("button", { name: "Menu" }).click();
    const phone = await changedByFocus(1); // from Menu, the first thing of what it opened
    expect(phone.changed).toBeGreaterThan(phone.width * 4);
    await context.close();
  });

  /** Fields of the forms that write, by page: typing into them could never be saved. */
  const WRITE_FIELDS: [path: string, fields: string[]][] = [
    ["libraries/LIBRARY", ["Title", "Video file", "New folder", "Video privacy"]],
    ["libraries/LIBRARY/videos/VIDEO", ["Video file", "New thumbnail (JPEG, PNG or GIF)"]],
    ["cloud", ["Description", "Restricted (cannot manage tokens)"]],
    ["cloud/disks", ["Name", "Size (GB)"]],
    ["cloud/floating-ips", ["Name"]],
    ["cloud/load-balancers", ["Name", "Source port", "Target port"]],
  ];

  const pathOf = (path: string) => path.replace("LIBRARY", libraryId).replace("VIDEO", videoId);

  it("disables every field of a form that writes for a read-only user, and says why on every page", async () => {
    const { context, page } = await openConsole(browser, app.baseUrl, READER);
    for (const [path, fields] of WRITE_FIELDS) {
      await page.goto(`/console/${pathOf(path)}`);
      const notice = page.getByRole("note").filter({ hasText: "Read-only access" });
      await notice.waitFor();
      expect(await notice.textContent()).toContain("changes are not allowed");
      for (const field of fields) {
        const control = page.getByLabel(field, { exact: true });
        await expect(control.isDisabled(), `${field} on ${path}`).resolves.toBe(true);
        // Disabled by its form's WriteFields, as on every form that writes: one rule, not one per field.
        const inWriteFields = page
          .locator("fieldset.write-fields[disabled]")
          .getByLabel(field, { exact: true });
        await expect(inWriteFields.count(), `${field} on ${path}`).resolves.toBe(1);
      }
    }
    await screenshot(page, "read-only-load-balancers");
    for (const path of ["keys", "libraries", "players", "webhooks", "cdn"]) {
      await page.goto(`/console/${path}`);
      await page.getByRole("note").filter({ hasText: "Read-only access" }).waitFor();
    }
    // An empty list does not ask them to use the button they cannot.
    await page.goto(`/console/webhooks?library=${libraryId}`);
    const noEndpoints = page.getByText("This library sends no webhooks yet.");
    await noEndpoints.waitFor();
    await expect(noEndpoints.textContent()).resolves.toBe("This library sends no webhooks yet.");
    // The account page is where a read-only user still changes something: their own password.
    await page.goto("/console/account");
    await expect(page.getByLabel("Current password").isDisabled()).resolves.toBe(false);
    await expect(page.locator("[data-read-only-notice]").count()).resolves.toBe(0);
    await context.close();
  });

  it("shows a user who may write the same fields enabled and no read-only notice", async () => {
    const { context, page } = await openConsole(browser, app.baseUrl, EDITOR);
    for (const [path, fields] of WRITE_FIELDS) {
      await page.goto(`/console/${pathOf(path)}`);
      for (const field of fields) {
        const control = page.getByLabel(field, { exact: true });
        await control.waitFor();
        await expect(control.isDisabled(), `${field} on ${path}`).resolves.toBe(false);
      }
      await expect(page.locator("[data-read-only-notice]").count()).resolves.toBe(0);
    }
    await context.close();
  });

  it("breaks none of the console's Content-Security-Policy on these pages", () => {
    expect(policyViolations).toEqual([]);
  });
});
