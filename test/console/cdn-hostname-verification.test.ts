import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type DnsServer, startDnsServer } from "../cdn/support.ts";
import { accessibilityViolations, screenshot } from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";

const EMAIL = "dns@example.invalid";
const HOSTNAME = "cdn.verify-e2e.invalid";

describeInBrowser("the console in Chromium: a CDN host name pending verification", () => {
  let app: ConsoleApp;
  let page: Page;
  let dns: DnsServer;

  beforeAll(async () => {
    dns = await startDnsServer();
    app = await startConsoleApp(
      {
        CUMULO_CDN_HOSTNAME_VERIFICATION: "dns",
        CUMULO_DNS_SERVERS: dns.address,
        CUMULO_ORIGIN_ALLOW_PRIVATE: "true",
      },
      { users: [{ email: EMAIL }] },
    );
    ({ page } = await app.launch(EMAIL));
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await dns?.close();
  });

  it("shows the TXT record to publish, the refusal while it is missing, and verifies once it is there", async () => {
    const created = await app.request("POST", "/v1/cdn/distributions", {
      json: { hostname: HOSTNAME, origin_url: "http://127.0.0.1:9" },
    });
    const verification = created.body.data.hostname_verification;
    await page.goto("/console/cdn");
    const row = page.getByRole("row", { name: new RegExp(HOSTNAME.replaceAll(".", "\\.")) });
    await row.getByText("Not verified").waitFor();
    await row.getByText(`_cumulo-challenge.${HOSTNAME}`).waitFor();
    await row.getByText(verification.record_value).waitFor();
    await row.getByText("Claim expires").waitFor();
    await row.locator(`time[datetime="${verification.expires_at}"]`).waitFor();
    await expect(accessibilityViolations(page)).resolves.toEqual([]);
    await screenshot(page, "cdn-hostname-pending");

    await row.getByRole("button", { name: `Verify ${HOSTNAME}` }).click();
    await row
      .getByRole("alert")
      .getByText(/expected a TXT record _cumulo-challenge\./)
      .waitFor();

    dns.records.set(`_cumulo-challenge.${HOSTNAME}`, [[verification.record_value]]);
    await row.getByRole("button", { name: `Verify ${HOSTNAME}` }).click();
    await row.getByText("Not verified").waitFor({ state: "detached" });
    const after = await app.request("GET", `/v1/cdn/distributions/${created.body.data.id}`);
    expect(after.body.data.hostname_verification.status).toBe("verified");
  });
});
