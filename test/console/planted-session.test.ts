import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { screenshot, signInInBrowser } from "../support/browser.ts";
import { createConsoleUser, PASSWORD, signIn } from "../support/console.ts";
import {
  type ConsoleApp,
  describeInBrowser,
  openConsole,
  startConsoleApp,
} from "../support/console-browser.ts";

const TENANT_ORGANIZATION = "Tenant on the edge";
const TENANT_EMAIL = "tenant@example.com";
const VISITOR_EMAIL = "visitor@example.com";
const NOTICE = "A session this console did not start was found in your browser and was not used.";

/**
 * A tenant's page as the edge serves it on another port of the console's host (the same site to a
 * browser): its script sets the console's session cookie to the tenant's own live session.
 */
function tenantPage(cookie: string): Promise<Server> {
  const server = createServer((_request, response) => {
    response.writeHead(200, { "content-type": "text/html" });
    response.end(
      `<!doctype html><title>Tenant</title><script>document.cookie = ${JSON.stringify(`${cookie}; path=/`)};</script>`,
    );
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

describeInBrowser("the console in Chromium: a session it did not start", () => {
  let app: ConsoleApp;
  let browser: Browser;
  let tenant: Server;
  let tenantCookie: string;

  beforeAll(async () => {
    app = await startConsoleApp();
    browser = await app.launchBrowser();
    const organization = await app.createOrganization(TENANT_ORGANIZATION);
    await createConsoleUser(app, { email: TENANT_EMAIL, organizationId: organization.organizationId });
    await createConsoleUser(app, { email: VISITOR_EMAIL });
    tenantCookie = (await signIn(app, TENANT_EMAIL)).cookie;
    tenant = await tenantPage(tenantCookie);
  });
  afterAll(async () => {
    tenant?.close();
    await app?.close();
  });

  it("is not used when a page on another port of the host planted it: sign-in with a notice, and it ends", async () => {
    const { context, page } = await openConsole(browser, app.baseUrl);
    const { port } = tenant.address() as AddressInfo;
    await page.goto(`http://127.0.0.1:${port}/`);
    // A script's cookie reaches the browser's cookie store a little after the page's load event.
    await expect
      .poll(async () =>
        (await context.cookies(app.baseUrl)).map((cookie) => `${cookie.name}=${cookie.value}`),
      )
      .toContain(tenantCookie);

    await page.goto("/console/libraries");
    await page.waitForURL("**/console/sign-in");
    await page.getByText(NOTICE).waitFor();
    await expect(page.getByText(TENANT_ORGANIZATION).count()).resolves.toBe(0);
    await page.screenshot({ path: "/tmp/login-binding-notice.png", fullPage: true });
    await screenshot(page, "sign-in-planted-session");
    // The tenant's session was ended (anyone holding its cookie may end it), so it cannot come back.
    const tenantSession = await app.request("GET", "/v1/console/session", {
      anonymous: true,
      headers: { cookie: tenantCookie },
    });
    expect(tenantSession.status).toBe(401);

    // The visitor signs in with their own account and stays signed in.
    await page.getByLabel("Email").fill(VISITOR_EMAIL);
    await page.getByLabel("Password").fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL("**/console/libraries");
    await expect(page.getByText(NOTICE).count()).resolves.toBe(0);
    await context.close();
  });

  it("keeps a session it started: reload, another tab, sign-out", async () => {
    const { context, page } = await openConsole(browser, app.baseUrl, VISITOR_EMAIL);
    await page.reload();
    await page.getByRole("heading", { name: "Libraries", level: 1 }).waitFor();
    expect(page.url()).toMatch(/\/console\/libraries$/);

    const other = await context.newPage();
    await other.goto("/console/keys");
    await other.getByRole("button", { name: "Sign out" }).waitFor();
    expect(other.url()).toMatch(/\/console\/keys$/);

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL("**/console/sign-in");
    await expect(page.evaluate("localStorage.getItem('cumulo-started-sessions')")).resolves.toBeNull();
    // Signed in again, it is the same as before: no notice, and a reload keeps the session.
    await signInInBrowser(page, VISITOR_EMAIL);
    await page.reload();
    await page.getByRole("heading", { name: "Libraries", level: 1 }).waitFor();
    await context.close();
  });
});
