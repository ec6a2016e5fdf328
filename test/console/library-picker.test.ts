import type { Page, Route } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { screenshot } from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";

const EMAIL = "picker@example.invalid";
const UNKNOWN_LIBRARY = "00000000-0000-4000-8000-000000000000";

/** The two pages that work on one library chosen in the shared library picker, and what each says. */
const PAGES = [
  {
    name: "players",
    path: "/console/players",
    noLibraries: "Players belong to a library: create a library first.",
  },
  {
    name: "webhooks",
    path: "/console/webhooks",
    noLibraries: "There are no libraries yet: create one first.",
  },
];

/** The library list of the picker (not one library's own address) answers 503. */
const isLibraryList = (url: URL) => url.pathname === "/v1/media/libraries";
const unavailable = (route: Route) =>
  route.fulfill({
    status: 503,
    contentType: "application/json",
    body: JSON.stringify({ code: "unavailable", message: "The library list is unavailable" }),
  });

describeInBrowser("the console in Chromium: the library picker of the players and webhooks pages", () => {
  let app: ConsoleApp;
  let page: Page;

  const picker = () => page.getByRole("combobox", { name: "Library", exact: true });
  const chosenOption = () => picker().locator("option:checked");

  beforeAll(async () => {
    app = await startConsoleApp({ CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" }, { users: [{ email: EMAIL }] });
    ({ page } = await app.launch(EMAIL));
  }, 120_000);
  afterAll(() => app?.close());

  it.each(PAGES)(
    "$name: says there is no library yet instead of an empty picker",
    async ({ name, path, noLibraries }) => {
      await page.goto(path);
      await page.getByText(noLibraries).waitFor();
      await screenshot(page, `library-picker-${name}-none`);
      await expect(picker().count()).resolves.toBe(0);
      await expect(page.getByLabel("Search libraries").count()).resolves.toBe(0);
    },
  );

  describe("with libraries", () => {
    let alpha: string;
    let beta: string;

    beforeAll(async () => {
      const create = async (name: string) => {
        const answer = await app.request("POST", "/v1/media/libraries", { json: { name } });
        expect(answer.status).toBe(201);
        return answer.body.data.id as string;
      };
      alpha = await create("Alpha");
      beta = await create("Beta");
      const player = await app.request("POST", `/v1/media/libraries/${alpha}/players`, {
        json: { name: "Alpha player" },
      });
      expect(player.status).toBe(201);
      const endpoint = await app.request("POST", `/v1/media/libraries/${alpha}/webhooks`, {
        json: { name: "Alpha hook", url: "http://127.0.0.1:9/hooks", events: ["*"] },
      });
      expect(endpoint.status).toBe(201);
    });

    it.each(PAGES)(
      "$name: says why the libraries could not be listed, and Try again lists them",
      async ({ name, path }) => {
        await page.route(isLibraryList, unavailable);
        try {
          await page.goto(`${path}?library=${alpha}`);
          const alert = page.getByRole("alert").filter({ hasText: "The library list is unavailable" });
          await alert.waitFor();
          await screenshot(page, `library-picker-${name}-error`);
          await expect(picker().count()).resolves.toBe(0);
        } finally {
          await page.unroute(isLibraryList, unavailable);
        }
        await page.getByRole("button", { name: "Try again" }).click();
        await chosenOption().filter({ hasText: "Alpha" }).waitFor({ state: "attached" });
        await expect(picker().inputValue()).resolves.toBe(alpha);
        await expect(page.getByRole("alert").count()).resolves.toBe(0);
      },
    );

    it.each(PAGES)(
      "$name: keeps the chosen library through a search that finds nothing, and says so",
      async ({ name, path }) => {
        await page.goto(`${path}?library=${alpha}`);
        await chosenOption().filter({ hasText: "Alpha" }).waitFor({ state: "attached" });
        await page.getByLabel("Search libraries").fill("no such library");
        await page.getByRole("status").filter({ hasText: "No other library matches the search." }).waitFor();
        await screenshot(page, `library-picker-${name}-search`);
        await expect(picker().inputValue()).resolves.toBe(alpha);
        await expect(picker().locator("option", { hasText: "Beta" }).count()).resolves.toBe(0);
        await page.getByLabel("Search libraries").fill("");
        await picker().locator("option", { hasText: "Beta" }).waitFor({ state: "attached" });
      },
    );

    it.each(PAGES)("$name: lines the search field up with the select on a phone", async ({ name, path }) => {
      await page.setViewportSize({ width: 390, height: 844 });
      try {
        await page.goto(`${path}?library=${alpha}`);
        await chosenOption().filter({ hasText: "Alpha" }).waitFor({ state: "attached" });
        const search = await page.getByLabel("Search libraries").boundingBox();
        const select = await picker().boundingBox();
        expect(search?.x).toBe(select?.x);
        expect(search?.width).toBe(select?.width);
        // As far apart as a form's stacked fields (0.9rem from a field to the next label); the
        // row's 1rem gap on top of that had doubled it.
        const searchField = await page.getByLabel("Search libraries").locator("..").boundingBox();
        const label = await page.locator(`label[for="${await picker().getAttribute("id")}"]`).boundingBox();
        expect(Math.round((label?.y ?? 0) - ((searchField?.y ?? 0) + (searchField?.height ?? 0)))).toBe(14);
        await screenshot(page, `library-picker-${name}-phone`);
      } finally {
        await page.setViewportSize({ width: 1280, height: 800 });
      }
    });

    it.each(PAGES)(
      "$name: names a library of the address that does not exist as not found",
      async ({ name, path }) => {
        await page.goto(`${path}?library=${UNKNOWN_LIBRARY}`);
        await chosenOption().filter({ hasText: "Library not found" }).waitFor({ state: "attached" });
        await screenshot(page, `library-picker-${name}-unknown`);
        await expect(picker().inputValue()).resolves.toBe(UNKNOWN_LIBRARY);
      },
    );

    it("players: shows the newest library at once, then the one chosen, and Back the one before", async () => {
      await page.goto("/console/players");
      // Without `?library=` the newest is shown and written into the address (a replace).
      await page.waitForURL(`**/console/players?library=${beta}`);
      await expect(picker().inputValue()).resolves.toBe(beta);
      await page.getByText("This library has no players yet.").waitFor();
      await screenshot(page, "library-picker-players");
      // The player dialog's two checkboxes are two rows, each box before its own words (on a
      // fresh load of this page they ran together: "Autoplay (muted) [ ] Loop").
      await page.getByRole("button", { name: "New player" }).click();
      const dialog = page.getByRole("dialog", { name: "New player" });
      const autoplay = await dialog.getByLabel("Autoplay (muted)").boundingBox();
      const loop = await dialog.getByLabel("Loop").boundingBox();
      expect(loop?.y).toBeGreaterThan((autoplay?.y ?? 0) + (autoplay?.height ?? 0));
      await screenshot(page, "player-dialog");
      await dialog.getByRole("button", { name: "Cancel" }).click();
      await picker().selectOption(alpha);
      await page.waitForURL(`**/console/players?library=${alpha}`);
      await page.getByRole("rowheader", { name: "Alpha player" }).waitFor();
      await page.goBack();
      await page.waitForURL(`**/console/players?library=${beta}`);
      await page.getByText("This library has no players yet.").waitFor();
      await expect(picker().inputValue()).resolves.toBe(beta);
    });

    it("webhooks: shows no library until one is chosen, and a new choice drops the chosen endpoint", async () => {
      await page.goto("/console/webhooks");
      await expect(chosenOption().textContent()).resolves.toBe("Choose a library…");
      await expect(page.getByRole("heading", { name: "Endpoints" }).count()).resolves.toBe(0);
      await picker().selectOption(alpha);
      await page.waitForURL(`**/console/webhooks?library=${alpha}`);
      await page.getByRole("button", { name: "Deliveries of Alpha hook" }).click();
      await page.waitForURL(/[?&]endpoint=/);
      await screenshot(page, "library-picker-webhooks");
      await picker().selectOption(beta);
      await page.waitForURL(`**/console/webhooks?library=${beta}`);
      await page.getByText("This library sends no webhooks yet").waitFor();
      await page.goBack();
      await page.waitForURL(/[?&]endpoint=/);
      await page.getByRole("button", { name: "Deliveries of Alpha hook" }).waitFor();
      await expect(picker().inputValue()).resolves.toBe(alpha);
      // The first option chooses no library again.
      await picker().selectOption("");
      await page.waitForURL("**/console/webhooks");
      // The address changes before the page has drawn its answer to it.
      await page.getByRole("heading", { name: "Endpoints" }).waitFor({ state: "detached" });
      await expect(chosenOption().textContent()).resolves.toBe("Choose a library…");
    });
  });
});
