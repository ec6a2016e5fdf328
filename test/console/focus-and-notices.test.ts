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
 * Findings of the console QA passes of 6 December (sessions 46 and 47): a dialog reopened at once
 * closed again, a button disabled by its own action dropped the focus, a redelivery's confirmation
 * was shown out of view, a secret shown once was cut off in its field, a refused confirmation dropped
 * the focus, a removal of what another tab had removed showed "Resource not found", and a purge named
 * only its first wrong line.
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

  it("keeps the focus on a confirmation's button when the API refuses its action", async () => {
    const vm = await app.cloud("POST", "/v1/user-resource/vm", { form: { name: "db" } });
    const disk = await app.cloud("POST", "/v1/storage/disks", {
      form: { size_gb: "5", display_name: "data" },
    });
    const attached = await app.cloud("POST", "/v1/user-resource/vm/storage/attach", {
      form: { uuid: vm.body.uuid, storage_uuid: disk.body.uuid },
    });
    expect(attached.status).toBe(200);
    await page.goto("/console/cloud/disks");
    await page.getByRole("button", { name: "Delete disk data" }).click();
    const dialog = page.getByRole("dialog", { name: "Delete disk" });
    await dialog.getByRole("button", { name: "Delete disk" }).focus();
    await page.keyboard.press("Enter");
    await dialog.getByRole("alert").waitFor();
    await expect(dialog.getByRole("alert").textContent()).resolves.toMatch(/attached/);
    await expect(page.evaluate(() => (globalThis as any).document.activeElement?.textContent)).resolves.toBe(
      "Delete disk",
    );
    await page.keyboard.press("Escape");
  });

  it("takes a removal of what was removed elsewhere as done, and reads the list again", async () => {
    const made = await app.request("POST", "/v1/organization/api-keys", { json: { name: "Twice revoked" } });
    expect(made.status).toBe(201);
    await page.goto("/console/keys");
    await page.getByRole("button", { name: "Revoke Twice revoked" }).click();
    // Revoked in another tab meanwhile.
    expect((await app.request("DELETE", `/v1/organization/api-keys/${made.body.data.id}`)).status).toBe(204);
    await page
      .getByRole("dialog", { name: "Revoke API key" })
      .getByRole("button", { name: "Revoke key" })
      .click();
    await page.getByRole("dialog", { name: "Revoke API key" }).waitFor({ state: "hidden" });
    await page.getByRole("rowheader", { name: "Twice revoked" }).waitFor({ state: "detached" });

    // A form saving what was removed elsewhere says so, rather than a bare "Resource not found".
    const endpoint = await createEndpoint(app, libraryId, { name: "Gone soon", url: receiver.url });
    await page.goto(`/console/webhooks?library=${libraryId}`);
    await page.getByRole("button", { name: "Edit Gone soon" }).click();
    expect((await app.request("DELETE", `${webhooksPath(libraryId)}/${endpoint.id}`)).status).toBe(200);
    const dialog = page.getByRole("dialog");
    await dialog.getByRole("button", { name: "Save" }).click();
    await dialog.getByText(/may have been removed, in another tab or by someone else/).waitFor();
  });

  it("names every wrong line of a purge, by the line it was typed on", async () => {
    const created = await app.request("POST", "/v1/cdn/distributions", {
      json: { hostname: "lines.example.com", origin_url: "https://origin.example.com" },
    });
    expect(created.status).toBe(201);
    await page.goto(`/console/cdn?distribution=${created.body.data.id}`);
    await page.getByRole("button", { name: "Purges of lines.example.com" }).click();
    await page.getByLabel("Paths to purge").fill("/ok.txt\n\nno-slash\n/a*b\n/fine/*");
    await page.getByRole("button", { name: "Purge", exact: true }).click();
    const error = page.locator('[data-field-error="paths"]');
    await error.waitFor();
    await expect(error.textContent()).resolves.toMatch(/^Line 3 .*Line 4 /);
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
