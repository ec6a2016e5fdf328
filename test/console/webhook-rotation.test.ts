import type { Browser, Locator, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { accessibilityViolations, policyViolations, screenshot } from "../support/browser.ts";
import {
  type ConsoleApp,
  describeInBrowser,
  openConsole,
  startConsoleApp,
} from "../support/console-browser.ts";
import {
  createEndpoint,
  header,
  type Receiver,
  signedWith,
  startReceiver,
  webhooksPath,
} from "../webhooks/helpers.ts";

const EMAIL = "ops@example.invalid";
const READER = "reader@example.invalid";
const SEVEN_DAYS_MS = 7 * 24 * 3600 * 1000;

/**
 * Rotating an endpoint's signing secret from the console with an overlap (docs/webhooks.md,
 * "Rotating the secret"): the person picks how long the replaced secret stays valid, the endpoint
 * shows until when, and deliveries meanwhile carry both signatures.
 */
describeInBrowser("the console in Chromium: rotating a webhook secret with an overlap", () => {
  let app: ConsoleApp;
  let browser: Browser;
  let page: Page;
  let receiver: Receiver;
  let libraryId: string;
  let endpoint: { id: string; secret: string };
  /** The secret the first rotation answered. */
  let rotatedSecret: string;

  const previousSecretCell = (shown: Page): Locator =>
    shown.getByRole("table", { name: "Webhook endpoints" }).locator('td[data-label="Previous secret"]');
  const endpointOfApi = async () =>
    (await app.request("GET", `${webhooksPath(libraryId)}/${endpoint.id}`)).body.data;
  /** Sends a test event from the delivery log and answers the request the receiver got. */
  const sendTestEvent = async () => {
    const before = receiver.received.length;
    await page.getByRole("button", { name: "Deliveries of Receiver" }).click();
    await page.getByRole("button", { name: "Send test event" }).click();
    const received = await receiver.waitFor(before + 1);
    return received[before] as (typeof received)[number];
  };

  beforeAll(async () => {
    receiver = await startReceiver();
    app = await startConsoleApp(
      { CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" },
      { users: [{ email: EMAIL }, { email: READER, readOnly: true }] },
    );
    const library = await app.request("POST", "/v1/media/libraries", { json: { name: "Rotation library" } });
    libraryId = library.body.data.id;
    endpoint = await createEndpoint(app, libraryId, { name: "Receiver", url: receiver.url });
    ({ browser, page } = await app.launch(EMAIL));
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await receiver?.close();
  });

  it("asks how long the current secret stays valid, shows the new one once and the overlap on the endpoint", async () => {
    await page.goto(`/console/webhooks?library=${libraryId}`);
    await expect(previousSecretCell(page).textContent()).resolves.toBe("—");
    await page.getByRole("button", { name: "Rotate secret of Receiver" }).click();
    const dialog = page.getByRole("dialog", { name: "Rotate secret of Receiver" });
    const overlap = dialog.getByRole("group", { name: "Keep the current secret valid" });
    await expect(
      overlap
        .getByRole("radio")
        .evaluateAll((radios) => radios.map((radio) => radio.parentElement?.textContent)),
    ).resolves.toEqual(["No: it stops at once", "For 1 hour", "For 24 hours", "For 7 days"]);
    // As the API without a body: the old secret stops at once unless the person picks an overlap.
    await expect(overlap.getByLabel("No: it stops at once").isChecked()).resolves.toBe(true);
    await overlap.getByText("Until then deliveries carry both signatures").waitFor();
    await expect(accessibilityViolations(page)).resolves.toEqual([]);
    await screenshot(page, "webhooks-rotate-dialog");
    await page.emulateMedia({ colorScheme: "dark" });
    try {
      await page.locator('html[data-theme="dark"]').waitFor({ state: "attached" });
      await expect(accessibilityViolations(page)).resolves.toEqual([]);
      await screenshot(page, "dark-webhooks-rotate-dialog");
    } finally {
      await page.emulateMedia({ colorScheme: null });
    }

    await overlap.getByLabel("For 7 days").check();
    const asked = Date.now();
    await dialog.getByRole("button", { name: "Rotate secret" }).click();
    const secretDialog = page.getByRole("dialog", { name: "New secret of Receiver" });
    rotatedSecret = await secretDialog.getByLabel("Signing secret").inputValue();
    const answered = Date.now();
    expect(rotatedSecret).toMatch(/^whsec_/);
    expect(rotatedSecret).not.toBe(endpoint.secret);
    await secretDialog.getByRole("button", { name: "I have copied it" }).click();
    await expect(page.locator("table").textContent()).resolves.not.toContain("whsec_");

    // The API kept the previous secret for 7 days, and the endpoint says until when, in local time.
    const expiresAt = (await endpointOfApi()).previous_secret_expires_at as string;
    expect(Date.parse(expiresAt)).toBeGreaterThanOrEqual(asked + SEVEN_DAYS_MS - 1000);
    expect(Date.parse(expiresAt)).toBeLessThanOrEqual(answered + SEVEN_DAYS_MS + 1000);
    const until = previousSecretCell(page).locator("time");
    await until.waitFor();
    await expect(until.getAttribute("datetime")).resolves.toBe(new Date(expiresAt).toISOString());
    const local = await page.evaluate((value) => new Date(value).toLocaleString(), expiresAt);
    await expect(previousSecretCell(page).textContent()).resolves.toBe(`Accepted until ${local}`);

    // Meanwhile a delivery is accepted by a receiver holding either secret.
    const delivery = await sendTestEvent();
    expect(header(delivery.headers["webhook-signature"]).split(" ")).toHaveLength(2);
    expect(signedWith(rotatedSecret, delivery)).toBe(true);
    expect(signedWith(endpoint.secret, delivery)).toBe(true);
    await expect(accessibilityViolations(page)).resolves.toEqual([]);
    await screenshot(page, "webhooks-rotate-overlap");
  });

  it("shows a read-only user the overlap, with Rotate secret disabled", async () => {
    const { context: readerContext, page: reader } = await openConsole(browser, app.baseUrl, READER);
    try {
      await reader.goto(`/console/webhooks?library=${libraryId}`);
      await previousSecretCell(reader).locator("time").waitFor();
      await expect(previousSecretCell(reader).textContent()).resolves.toMatch(/^Accepted until /);
      await expect(
        reader.getByRole("button", { name: "Rotate secret of Receiver" }).isDisabled(),
      ).resolves.toBe(true);
    } finally {
      await readerContext.close();
    }
  });

  it("rotates again at once: the dialog says the previous secret stops, and then only the new one signs", async () => {
    await page.goto(`/console/webhooks?library=${libraryId}`);
    await page.getByRole("button", { name: "Rotate secret of Receiver" }).click();
    const dialog = page.getByRole("dialog", { name: "Rotate secret of Receiver" });
    // One previous secret is kept: the one still in its overlap is dropped by this rotation.
    await expect(dialog.locator(".warning").textContent()).resolves.toMatch(
      /^The secret replaced last time, accepted until .+, stops at once\.$/,
    );
    await screenshot(page, "webhooks-rotate-dialog-during-overlap");
    // The last rotation's 7 days are not kept: each rotation starts from the API's default.
    await expect(dialog.getByLabel("No: it stops at once").isChecked()).resolves.toBe(true);
    await dialog.getByRole("button", { name: "Rotate secret" }).click();
    const secretDialog = page.getByRole("dialog", { name: "New secret of Receiver" });
    const newest = await secretDialog.getByLabel("Signing secret").inputValue();
    expect(newest).toMatch(/^whsec_/);
    expect(newest).not.toBe(rotatedSecret);
    await secretDialog.getByRole("button", { name: "I have copied it" }).click();

    await previousSecretCell(page).filter({ hasText: "—" }).waitFor();
    expect((await endpointOfApi()).previous_secret_expires_at).toBeUndefined();
    const delivery = await sendTestEvent();
    expect(signedWith(newest, delivery)).toBe(true);
    expect(signedWith(rotatedSecret, delivery)).toBe(false);
  });

  it("shows — once the overlap's time passes, without a reload", async () => {
    await app.request("POST", `${webhooksPath(libraryId)}/${endpoint.id}/rotate-secret`, {
      json: { previous_secret_expires_in_s: 3600 },
    });
    const expiresAt = Date.parse((await endpointOfApi()).previous_secret_expires_at);
    // A page whose clock the test moves on: the hour passes at once.
    const { context: clockContext, page: watched } = await openConsole(browser, app.baseUrl, EMAIL);
    try {
      await watched.clock.install();
      await watched.goto(`/console/webhooks?library=${libraryId}`);
      await previousSecretCell(watched).locator("time").waitFor();
      const webhookReads: string[] = [];
      watched.on("request", (request) => {
        if (request.url().includes("/webhooks")) webhookReads.push(request.url());
      });

      const shownAt = await watched.evaluate(() => Date.now());
      await watched.clock.fastForward(expiresAt - shownAt - 1000);
      await expect(previousSecretCell(watched).textContent()).resolves.toMatch(/^Accepted until /);
      await watched.clock.fastForward(2000);
      await previousSecretCell(watched).filter({ hasText: /^—$/ }).waitFor();
      expect(webhookReads).toEqual([]);
      await screenshot(watched, "webhooks-overlap-ended");
    } finally {
      await clockContext.close();
    }
  });

  it("breaks none of the console's Content-Security-Policy", () => {
    expect(policyViolations).toEqual([]);
  });
});
