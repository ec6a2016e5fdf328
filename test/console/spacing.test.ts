import type { Locator, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { screenshot } from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";

const EMAIL = "spacing@example.invalid";

/** Space between panels (their margin) and inside a panel's edges (its padding): 1rem of 15 px. */
const PANEL_GAP = 15;
/** A field's margin, 0.9rem: from a field (its hint included) to the next field's label, in px. */
const FIELD_GAP = 14;

async function box(locator: Locator) {
  const found = await locator.boundingBox();
  if (!found) throw new Error("not laid out");
  return found;
}

/** Pixels from the bottom of `upper` to the top of `lower`. */
async function spaceBetween(upper: Locator, lower: Locator): Promise<number> {
  const [top, bottom] = [await box(upper), await box(lower)];
  return Math.round(bottom.y - (top.y + top.height));
}

const panel = (page: Page, heading: string) =>
  page
    .locator("section.panel, .card")
    .filter({ has: page.getByRole("heading", { name: heading, exact: true }) });

/**
 * On a phone, what sits side by side on a wide screen (panels, fields) stacks as far apart as what
 * is stacked anyway: a grid's row gap added to their own margin had doubled the space between some.
 */
describeInBrowser("the console in Chromium: even spacing and aligned fields", () => {
  let app: ConsoleApp;
  let page: Page;
  let libraryId: string;
  let videoId: string;

  beforeAll(async () => {
    app = await startConsoleApp({}, { users: [{ email: EMAIL }] });
    const library = await app.request("POST", "/v1/media/libraries", { json: { name: "Spacing" } });
    expect(library.status).toBe(201);
    libraryId = library.body.data.id;
    const video = await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
      json: { title: "Spacing video" },
    });
    expect(video.status).toBe(201);
    videoId = video.body.data.id;
    // A name wider than a tablet's row beside the library search.
    const long = await app.request("POST", "/v1/media/libraries", {
      json: { name: "Broadcasting Company Europe: the evening news archive of 2026, all regions" },
    });
    expect(long.status).toBe(201);
    ({ page } = await app.launch(EMAIL));
    await page.setViewportSize({ width: 390, height: 844 });
  }, 120_000);
  afterAll(() => app?.close());

  it("library page: the panels stack a panel's margin apart, the upload form's fields a field's", async () => {
    await page.goto(`/console/libraries/${libraryId}`);
    await page.getByRole("heading", { name: "Videos", exact: true }).waitFor();
    await screenshot(page, "spacing-library-phone");
    const [folders, upload, videos] = ["Folders", "Upload a video", "Videos"].map((name) =>
      panel(page, name),
    );
    await expect(spaceBetween(folders, upload)).resolves.toBe(PANEL_GAP);
    await expect(spaceBetween(upload, videos)).resolves.toBe(PANEL_GAP);
    const titleField = upload.locator(".field", { has: page.getByLabel("Title") });
    await expect(spaceBetween(titleField, upload.getByText("Video file", { exact: true }))).resolves.toBe(
      FIELD_GAP,
    );
    // The security rules' checkbox is a field's margin above the Action below it (it touched it).
    const referrers = page.getByRole("group", { name: "Referrers" });
    await expect(
      spaceBetween(referrers.getByText("Enforce this rule"), referrers.getByText("Action", { exact: true })),
    ).resolves.toBe(FIELD_GAP);
  });

  it("video page: the Player and Processing panels stack a panel's margin apart", async () => {
    await page.goto(`/console/libraries/${libraryId}/videos/${videoId}`);
    await page.getByRole("heading", { name: "Processing", exact: true }).waitFor();
    await screenshot(page, "spacing-video-phone");
    const [player, processing, thumbnail] = ["Player", "Processing", "Thumbnail"].map((name) =>
      panel(page, name),
    );
    await expect(spaceBetween(player, processing)).resolves.toBe(PANEL_GAP);
    await expect(spaceBetween(processing, thumbnail)).resolves.toBe(PANEL_GAP);
  });

  it("account page: a card's heading and last line are its padding from its edges", async () => {
    await page.goto("/console/account");
    const heading = page.getByRole("heading", { name: "Signed in as" });
    await heading.waitFor();
    await screenshot(page, "spacing-account-phone");
    const card = panel(page, "Signed in as");
    const [edges, top, bottom] = [await box(card), await box(heading), await box(card.locator("p"))];
    // Within a pixel: the card's 1px border.
    expect(Math.round(top.y - edges.y)).toBe(PANEL_GAP + 1);
    expect(Math.round(edges.y + edges.height - (bottom.y + bottom.height))).toBe(PANEL_GAP + 1);
  });

  it("player dialog: the colour that wraps to a second row is a field's margin below the first", async () => {
    await page.goto(`/console/players?library=${libraryId}`);
    await page.getByRole("button", { name: "New player" }).click();
    const dialog = page.getByRole("dialog", { name: "New player" });
    const primary = dialog.locator(".field", { has: page.getByLabel("Primary colour") });
    const text = dialog.locator(".field", { has: page.getByLabel("Text", { exact: true }) });
    await expect(spaceBetween(primary, text)).resolves.toBe(FIELD_GAP);
    await page.keyboard.press("Escape");
  });

  it("players page on a tablet: a library select wrapped below the search is a field's margin below it", async () => {
    await page.setViewportSize({ width: 800, height: 1000 });
    try {
      await page.goto(`/console/players?library=${libraryId}`);
      const select = page.getByRole("combobox", { name: "Library", exact: true });
      await select.locator("option:checked").filter({ hasText: "Spacing" }).waitFor({ state: "attached" });
      await screenshot(page, "spacing-library-picker-tablet");
      const searchField = page.locator(".field", { has: page.getByLabel("Search libraries") });
      const [search, chosen] = [await box(searchField), await box(select)];
      expect(chosen.y).toBeGreaterThan(search.y + search.height);
      await expect(spaceBetween(searchField, page.getByText("Library", { exact: true }))).resolves.toBe(
        FIELD_GAP,
      );
    } finally {
      await page.setViewportSize({ width: 390, height: 844 });
    }
  });

  it("cloud forms in a row: the fields level whatever their hints, the button level with them", async () => {
    const middle = async (locator: Locator) => {
      const found = await box(locator);
      return Math.round(found.y + found.height / 2);
    };
    await page.setViewportSize({ width: 1280, height: 800 });
    try {
      await page.goto("/console/cloud/load-balancers");
      const name = page.getByLabel("Name");
      await name.waitFor();
      await screenshot(page, "spacing-load-balancer-form");
      // Only Name has a hint: aligned to the row's bottom, it stood higher than the ports.
      const level = await middle(name);
      await expect(middle(page.getByLabel("Source port"))).resolves.toBe(level);
      await expect(middle(page.getByLabel("Target port"))).resolves.toBe(level);
      await expect(middle(page.getByRole("button", { name: "Create load balancer" }))).resolves.toBe(level);
      await page.goto("/console/cloud/disks");
      const size = page.getByLabel("Size (GB)");
      await size.waitFor();
      await expect(middle(page.getByRole("button", { name: "Create disk" }))).resolves.toBe(
        await middle(size),
      );
    } finally {
      await page.setViewportSize({ width: 390, height: 844 });
    }
    // On a phone the form is a column: the button a field's margin below the last field.
    await page.goto("/console/cloud/disks");
    const sizeField = page.locator(".field", { has: page.getByLabel("Size (GB)") });
    await sizeField.waitFor();
    await expect(spaceBetween(sizeField, page.getByRole("button", { name: "Create disk" }))).resolves.toBe(
      FIELD_GAP,
    );
  });
});
