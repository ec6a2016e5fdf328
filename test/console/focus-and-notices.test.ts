import type { Locator, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { screenshot } from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";
import { waitUntil } from "../support/wait.ts";
import { createEndpoint, type Receiver, startReceiver, webhooksPath } from "../webhooks/helpers.ts";

const EMAIL = "keyboard@example.invalid";

const activeLabel = (page: Page) =>
  page.evaluate(
    () => (globalThis as any).document.activeElement?.getAttribute("aria-label") as string | null,
  );

/** Whether the element is wholly inside the window, as the person sees it. */
const wholeInView = (locator: Locator) =>
  locator.evaluate((element) => {
    const box = element.getBoundingClientRect();
    return box.top >= 0 && box.bottom <= (globalThis as any).innerHeight;
  });

/**
 * Four findings of the console QA pass of 6 December (session 46): a dialog reopened at once closed
 * again, a button disabled by its own action dropped the focus, a redelivery's confirmation was
 * shown out of view, and a secret shown once was cut off in its field.
 */
describeInBrowser("the console in Chromium: focus and notices where the person is", () => {
  let app: ConsoleApp;
  let page: Page;
  let receiver: Receiver;
  let libraryId: string;

  beforeAll(async () => {
    receiver = await startReceiver();
    app = await startConsoleApp({ CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" }, { users: [{ email: EMAIL }] });
    const library = await app.request("POST", "/v1/media/libraries", { json: { name: "Focus library" } });
    libraryId = library.body.data.id;
    for (const name of ["Brand", "Classic"]) {
      const player = await app.request("POST", `/v1/media/libraries/${libraryId}/players`, {
        json: { name },
      });
      expect(player.status).toBe(201);
    }
    ({ page } = await app.launch(EMAIL));
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await receiver?.close();
  });

  it("keeps a dialog reopened with Enter right after Escape closed it open", async () => {
    await page.goto(`/console/players?library=${libraryId}`);
    await page.getByRole("rowheader", { name: "Brand" }).waitFor();
    const dialog = page.getByRole("dialog", { name: "New player" });
    for (let round = 0; round < 3; round += 1) {
      await page.getByRole("button", { name: "New player" }).focus();
      await page.keyboard.press("Enter");
      await dialog.waitFor();
      await page.keyboard.press("Escape");
      await page.keyboard.press("Enter");
      await page.waitForTimeout(300);
      await expect(dialog.isVisible(), `round ${round}`).resolves.toBe(true);
      await page.keyboard.press("Escape");
      await dialog.waitFor({ state: "hidden" });
    }
  });

  it("leaves the focus in the row when its Mark default button becomes disabled", async () => {
    await page.goto(`/console/players?library=${libraryId}`);
    await page.getByRole("button", { name: "Mark default: Classic" }).click();
    await page
      .locator("button:disabled", { hasText: "Mark default" })
      .and(page.getByLabel("Mark default: Classic"))
      .waitFor();
    await waitUntil(
      async () => (await activeLabel(page)) === "Edit Classic",
      3_000,
      "the focus on Edit Classic",
    );
  });

  it("shows a redelivery's outcome beside its Redeliver button, in view", async () => {
    const endpoint = await createEndpoint(app, libraryId, { name: "Long log", url: receiver.url });
    const path = `${webhooksPath(libraryId)}/${endpoint.id}`;
    for (let sent = 0; sent < 6; sent += 1) {
      expect((await app.request("POST", `${path}/test`)).status).toBeLessThan(300);
    }
    await waitUntil(
      async () => (await app.request("GET", `${path}/events`)).body.data.length >= 6,
      15_000,
      "six test attempts recorded",
    );
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto(`/console/webhooks?library=${libraryId}&endpoint=${endpoint.id}`);
      const items = page.locator("li.delivery");
      await waitUntil(async () => (await items.count()) >= 6, 10_000, "the delivery log");
      for (let index = 0; index < 4; index += 1) await items.nth(index).locator("summary").click();
      const fourth = items.nth(3);
      await fourth.getByRole("button", { name: "Redeliver" }).click();
      const notice = fourth.getByRole("status");
      await notice.waitFor();
      await expect(notice.textContent()).resolves.toMatch(/^Redelivery: attempt 2 queued/);
      await expect(wholeInView(notice)).resolves.toBe(true);
      await screenshot(page, "redelivery-notice-phone");
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });

  it("shows a secret shown once whole in its field, on a phone", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto("/console/keys");
      await page.getByRole("button", { name: "New API key" }).click();
      const dialog = page.getByRole("dialog", { name: "New API key" });
      await dialog.getByLabel("Name", { exact: true }).fill("phone key");
      await dialog.getByRole("button", { name: "Create key" }).click();
      const field = page.getByRole("dialog", { name: /created/ }).getByLabel("API key");
      await field.waitFor();
      const shown = await field.evaluate((element: any) => ({
        length: String(element.value).length,
        wide: element.scrollWidth - element.clientWidth,
        tall: element.scrollHeight - element.clientHeight,
      }));
      expect(shown.length).toBeGreaterThan(30);
      expect(shown).toMatchObject({ wide: 0, tall: 0 });
      await screenshot(page, "api-key-secret-phone");
      await page.getByRole("button", { name: "I have copied it" }).click();
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });
});
