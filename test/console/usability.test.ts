import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { waitUntilActive } from "../media/helpers.ts";
import { accessibilityViolations, freePort, screenshot, signInInBrowser } from "../support/browser.ts";
import { createConsoleUser } from "../support/console.ts";
import {
  type ConsoleApp,
  describeInBrowser,
  openConsole,
  startConsoleApp,
} from "../support/console-browser.ts";
import { waitUntil } from "../support/wait.ts";

const EMAIL = "customer@example.invalid";

/** What has the keyboard focus: its id, its `name` and whether it is inside the page's `main`. */
const focused = (page: Page) =>
  page.evaluate(() => {
    const active = (globalThis as any).document.activeElement;
    return {
      id: active?.id as string | undefined,
      name: active?.getAttribute?.("name") as string | null | undefined,
      inMain: Boolean(active?.closest?.("main")),
    };
  });

/** The text of the cell in `column` of the row named `rowName` in the table captioned `caption`. */
async function cellText(page: Page, caption: string, rowName: string, column: string): Promise<string> {
  const table = page.locator("table", { has: page.locator("caption", { hasText: caption }) });
  const headers = await table.locator("thead th").allTextContents();
  const index = headers.indexOf(column);
  expect(index, `column ${column} of ${caption}`).toBeGreaterThanOrEqual(0);
  const row = table.locator("tbody tr", { has: page.getByRole("rowheader", { name: rowName }) });
  return (await row.locator("th, td").nth(index).textContent()) ?? "";
}

/**
 * What a customer meets on the pages rather than what the API stores: words instead of API values,
 * figures in units a person reads, and the keyboard focus where the work goes on.
 */
describeInBrowser("the console in Chromium: words, figures and focus", () => {
  let app: ConsoleApp;
  let browser: Browser;
  let page: Page;
  let libraryId: string;

  const createLibrary = async (name: string) => {
    const answer = await app.request("POST", "/v1/media/libraries", { json: { name } });
    expect(answer.status).toBe(201);
    return answer.body.data.id as string;
  };

  beforeAll(async () => {
    app = await startConsoleApp(
      { CUMULO_EDGE_PORT: String(await freePort()) },
      { users: [{ email: EMAIL }] },
    );
    libraryId = await createLibrary("Catalogue");
    await waitUntilActive(app, libraryId);
    ({ browser, page } = await app.launch(EMAIL));
  }, 120_000);
  afterAll(() => app?.close());

  it("names a library's usage in words and, when the API refuses a field, puts the focus on it", async () => {
    await page.goto("/console/libraries");
    await page.getByRole("button", { name: "New library" }).click();
    const dialog = page.getByRole("dialog", { name: "New library" });
    const usages = await dialog.getByLabel("Usage").locator("option").allTextContents();
    expect(usages).toContain("Video on demand");
    expect(usages.join(" ")).not.toContain("_");
    await dialog.getByLabel("Description").fill("Typed before the error");
    await dialog.getByRole("button", { name: "Create library" }).click();
    await dialog.locator('[data-field-error="name"]').waitFor();
    // The refused field has the focus, not the button below the form; what was typed stays.
    await waitUntil(async () => (await focused(page)).name === "name", 3_000, "the focus on Name");
    await expect(dialog.getByLabel("Description").inputValue()).resolves.toBe("Typed before the error");
    // Corrected and sent with Enter from the field.
    await page.keyboard.type("Made with Enter");
    await page.keyboard.press("Enter");
    await page.getByRole("rowheader", { name: "Made with Enter" }).waitFor();
  });

  it("puts the focus on the next row's same button after a row's Delete removed that row", async () => {
    await createLibrary("Doomed");
    await page.goto("/console/libraries");
    // By name or newest first, the row after Doomed's is that of the library made by the test before.
    await page.getByRole("button", { name: "Delete Doomed" }).click();
    await page
      .getByRole("dialog", { name: "Delete library" })
      .getByRole("button", { name: "Delete library" })
      .click();
    await page.getByRole("rowheader", { name: "Doomed" }).waitFor({ state: "detached" });
    // The Delete button went with its row: the focus is on the Delete of the row in its place, not
    // dropped to the document.
    await waitUntil(
      async () =>
        (await page.evaluate(() =>
          (globalThis as any).document.activeElement?.getAttribute("aria-label"),
        )) === "Delete Made with Enter",
      3_000,
      "the focus on the next row's Delete",
    );
  });

  it("puts the focus on the page when the last row of a table went", async () => {
    const disk = await app.cloud("POST", "/v1/storage/disks", {
      json: { size_gb: 5, display_name: "scratch" },
    });
    expect(disk.status).toBeLessThan(300);
    await page.goto("/console/cloud/disks");
    await page.getByRole("button", { name: /Delete/ }).click();
    await page
      .getByRole("dialog")
      .getByRole("button", { name: /Delete/ })
      .click();
    await page.getByRole("rowheader", { name: "scratch" }).waitFor({ state: "detached" });
    await waitUntil(async () => (await focused(page)).id === "main", 3_000, "the focus on main");
    await page.keyboard.press("Tab");
    expect((await focused(page)).inMain).toBe(true);
  });

  it("shows no duration for a video without a file, rather than 00:00:00", async () => {
    const created = await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
      json: { title: "Waiting for its file" },
    });
    expect(created.status).toBe(201);
    await page.goto(`/console/libraries/${libraryId}`);
    await page.getByRole("rowheader", { name: "Waiting for its file" }).waitFor();
    expect((await cellText(page, "Videos", "Waiting for its file", "Duration")).trim()).toBe("—");
    // A status that no video has is said as such, not as a library without videos.
    await page.getByLabel("Status").selectOption("failed");
    await page.getByText('No video here has the status "failed".').waitFor();
    await expect(page.getByText("No videos here yet.").count()).resolves.toBe(0);
  });

  it("names a webhook endpoint's events in words, not the API's `*`", async () => {
    for (const [name, events] of [
      ["Everything", ["*"]],
      ["Outcomes", ["ready", "failed"]],
    ] as const) {
      const answer = await app.request("POST", `/v1/media/libraries/${libraryId}/webhooks`, {
        json: { name, url: "https://hooks.example.com/cumulo", events },
      });
      expect(answer.status).toBe(201);
    }
    await page.goto(`/console/webhooks?library=${libraryId}`);
    await page.getByRole("rowheader", { name: "Everything" }).waitFor();
    expect(await cellText(page, "Webhook endpoints", "Everything", "Events")).toBe("All events");
    expect(await cellText(page, "Webhook endpoints", "Outcomes", "Events")).toBe("Ready, Failed");
  });

  it("shows a distribution's default TTL in days, hours and minutes", async () => {
    for (const [hostname, ttl] of [
      ["daily.example.com", 86_400],
      ["often.example.com", 5_400],
    ] as const) {
      const answer = await app.request("POST", "/v1/cdn/distributions", {
        json: { hostname, origin_url: "https://origin.example.com", default_ttl_s: ttl },
      });
      expect(answer.status).toBe(201);
    }
    await page.goto("/console/cdn");
    await page.getByRole("rowheader", { name: "daily.example.com" }).waitFor();
    expect(await cellText(page, "CDN distributions", "daily.example.com", "Default TTL")).toBe("1 day");
    expect(await cellText(page, "CDN distributions", "often.example.com", "Default TTL")).toBe(
      "1 hour 30 minutes",
    );
  });

  it("brings the purge form and the delivery log into view when their button is used on a phone", async () => {
    /** Whether the heading is on screen and has the focus. */
    const shown = (name: string) =>
      page.evaluate((name) => {
        const document = (globalThis as any).document;
        const heading = [...document.querySelectorAll("h2")].find((h: any) => h.textContent === name);
        if (!heading) return false;
        const box = heading.getBoundingClientRect();
        const onScreen = box.top >= 0 && box.bottom <= (globalThis as any).innerHeight;
        return onScreen && document.activeElement === heading;
      }, name);
    await page.setViewportSize({ width: 390, height: 600 });
    try {
      // The distributions of the test before, and the library's own, fill more than a phone's screen.
      await page.goto("/console/cdn");
      await page.getByRole("button", { name: "Purges of daily.example.com" }).click();
      await waitUntil(() => shown("Purges of daily.example.com"), 3_000, "the purge form in view");
      await page.goto(`/console/webhooks?library=${libraryId}`);
      await page.getByRole("button", { name: "Deliveries of Outcomes" }).click();
      await waitUntil(() => shown("Deliveries of Outcomes"), 3_000, "the delivery log in view");
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });

  it("gives a VM's memory in GB and says when an address is not assigned", async () => {
    const vm = await app.cloud("POST", "/v1/user-resource/vm", {
      json: { name: "db-primary", vcpu: 4, ram: 8192, password: "Secret123!" },
    });
    expect(vm.status).toBeLessThan(300);
    const ip = await app.cloud("POST", "/v1/network/ip_addresses", { json: { name: "frontend" } });
    expect(ip.status).toBeLessThan(300);
    await page.goto("/console/cloud/vms");
    await page.getByRole("rowheader", { name: "db-primary" }).waitFor();
    expect(await cellText(page, "Virtual machines", "db-primary", "Size")).toBe("4 vCPUs · 8 GB");
    await page.goto("/console/cloud/floating-ips");
    const address = ip.body.address as string;
    await page.getByRole("rowheader", { name: address }).waitFor();
    expect(await cellText(page, "Floating IPs", address, "Assigned to")).toBe("Not assigned");
  });

  it("shows a cloud token's creation time in the reader's time zone (the API's time has no zone: UTC)", async () => {
    const created = await app.cloud("POST", "/v1/user-resource/token", { json: { description: "tz-check" } });
    expect(created.status).toBeLessThan(300);
    const token = (created.body as { description: string; created_at: string }[])[0];
    expect(token?.created_at).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
    // A reader in Tokyo (UTC+9 all year): the time shown is nine hours after the API's.
    const tokyo = await browser.newContext({
      baseURL: app.baseUrl,
      timezoneId: "Asia/Tokyo",
      locale: "en-US",
    });
    try {
      const reader = await tokyo.newPage();
      await signInInBrowser(reader, EMAIL);
      await reader.goto("/console/cloud");
      await reader.getByRole("rowheader", { name: "tz-check" }).waitFor();
      const expected = new Date(`${token?.created_at.replace(" ", "T")}Z`).toLocaleString("en-US", {
        timeZone: "Asia/Tokyo",
      });
      expect(await cellText(reader, "Cloud tokens", "tz-check", "Created")).toBe(expected);
    } finally {
      await tokyo.close();
    }
  });

  it("says whether a webhook attempt was delivered and names its event in words", async () => {
    const endpoints = await app.request("GET", `/v1/media/libraries/${libraryId}/webhooks`);
    const endpoint = (endpoints.body.data as { id: string; name: string }[]).find(
      (item) => item.name === "Outcomes",
    );
    expect(endpoint).toBeDefined();
    const path = `/v1/media/libraries/${libraryId}/webhooks/${endpoint?.id}`;
    expect((await app.request("POST", `${path}/test`)).status).toBeLessThan(300);
    await waitUntil(
      async () => (await app.request("GET", `${path}/events`)).body.data.length > 0,
      15_000,
      "the test attempt recorded",
    );
    await page.goto(`/console/webhooks?library=${libraryId}&endpoint=${endpoint?.id}`);
    const summary = page.locator('[data-delivery-event="test"] summary').first();
    await summary.waitFor();
    const outcome = (await summary.locator(".status").textContent()) ?? "";
    expect(["delivered", "not delivered"]).toContain(outcome);
    await expect(summary.locator("strong").textContent()).resolves.toBe("Test event");
  });

  it("says that a period had no traffic instead of charts reading 0 in total and highest 0.0 %", async () => {
    // This organization's distributions were never asked for anything.
    await page.goto("/console/cdn/analytics");
    await page.getByText("No traffic in this period.").waitFor();
    await expect(page.locator("figure.chart").count()).resolves.toBe(0);
  });

  it("leads an organization without libraries from the webhooks and players pages to the libraries page", async () => {
    const other = await app.createOrganization("No libraries yet");
    await createConsoleUser(app, { email: "newcomer@example.invalid", organizationId: other.organizationId });
    const { context: fresh, page: newcomer } = await openConsole(
      browser,
      app.baseUrl,
      "newcomer@example.invalid",
    );
    try {
      for (const [path, link] of [
        ["/console/webhooks", "create one"],
        ["/console/players", "create a library"],
      ] as const) {
        await newcomer.goto(path);
        await newcomer.getByRole("link", { name: link, exact: true }).click();
        await newcomer.waitForURL("**/console/libraries");
      }
    } finally {
      await fresh.close();
    }
  });

  it("says in words what to do when a proxy answers with its own error page", async () => {
    const list = "**/v1/cdn/distributions?*";
    await page.route(list, (route) =>
      route.fulfill({ status: 502, contentType: "text/html", body: "<h1>502 Bad Gateway</h1>" }),
    );
    try {
      await page.goto("/console/cdn");
      const alert = page.getByRole("alert");
      await alert.getByText("The server could not answer (HTTP 502). Try again in a moment.").waitFor();
      await page.unroute(list);
      await alert.getByRole("button", { name: "Try again" }).click();
      await page.getByRole("rowheader", { name: "daily.example.com" }).waitFor();
    } finally {
      await page.unroute(list);
    }
  });

  it("puts the focus on the chosen page when a link of the phone's menu is used", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto("/console/libraries");
      await page.getByRole("button", { name: "Menu" }).click();
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Players" }).focus();
      await page.keyboard.press("Enter");
      await page.waitForURL("**/console/players");
      // The menu closed with the link in it; the focus is on the page chosen, not the document.
      await waitUntil(async () => (await focused(page)).id === "main", 3_000, "the focus on main");
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
    // On a wider screen too, where the link stays in view: the page chosen is announced and the next
    // Tab goes into it (QA of 5 December, session 43: the focus stayed on the link).
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Webhooks" }).focus();
    await page.keyboard.press("Enter");
    await page.waitForURL("**/console/webhooks");
    await waitUntil(async () => (await focused(page)).id === "main", 3_000, "the focus on main");
  });

  it("follows the system's theme, keeps a chosen one across reloads, and shows it before the app runs", async () => {
    /** The theme on <html>, the page's background and the choice kept in the browser. */
    const shown = () =>
      page.evaluate(() => {
        const root = (globalThis as any).document.documentElement;
        return {
          theme: root.dataset.theme as string | undefined,
          background: (globalThis as any).getComputedStyle(root).backgroundColor as string,
          kept: (globalThis as any).localStorage.getItem("cumulo-console-theme") as string | null,
        };
      });
    const themed = (theme: string) =>
      page.locator(`html[data-theme="${theme}"]`).waitFor({ state: "attached", timeout: 3_000 });
    try {
      await page.emulateMedia({ colorScheme: "light" });
      await page.goto("/console/libraries");
      const picker = page.getByLabel("Theme");
      await expect(picker.inputValue()).resolves.toBe("system");
      const light = await shown();
      expect(light).toMatchObject({ theme: "light", kept: null });
      // The system turns dark while the console is open: so does the console.
      await page.emulateMedia({ colorScheme: "dark" });
      await themed("dark");
      const dark = await shown();
      expect(dark.background).not.toBe(light.background);
      // Light chosen against the system's dark, kept across a reload.
      await picker.selectOption("light");
      await themed("light");
      await page.reload();
      await expect(picker.inputValue()).resolves.toBe("light");
      await expect(shown()).resolves.toEqual({ ...light, kept: "light" });
      // Dark chosen under a light system: the next load has it on <html> before the app's scripts
      // run (here they never do), so the page is never drawn light first.
      await page.emulateMedia({ colorScheme: "light" });
      await picker.selectOption("dark");
      await themed("dark");
      await page.route("**/console/assets/*.js", (route) => route.abort());
      try {
        await page.reload();
        await expect(shown()).resolves.toEqual({ ...dark, kept: "dark" });
      } finally {
        await page.unroute("**/console/assets/*.js");
      }
      // Back to the system's: nothing kept.
      await page.reload();
      await picker.selectOption("system");
      await themed("light");
      await expect(shown()).resolves.toEqual(light);
    } finally {
      await page.emulateMedia({ colorScheme: null });
      await page.evaluate(() => (globalThis as any).localStorage.removeItem("cumulo-console-theme"));
    }
  });

  it("passes axe (contrast, label in name) in the dark theme on a laptop's and a phone's screen", async () => {
    const video = await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
      json: { title: "Seen in the dark" },
    });
    expect(video.status).toBe(201);
    const player = await app.request("POST", `/v1/media/libraries/${libraryId}/players`, {
      json: { name: "Night" },
    });
    expect(player.status).toBe(201);
    // Each page, what shows it loaded, and whether it is checked on a phone too (a table as cards;
    // the players page's are as the libraries page's).
    const pages = [
      ["libraries", "/console/libraries", page.getByRole("rowheader", { name: "Catalogue" }), true],
      [
        "video",
        `/console/libraries/${libraryId}/videos/${video.body.data.id}`,
        page.getByRole("heading", { name: "Seen in the dark" }),
        false,
      ],
      [
        "players",
        `/console/players?library=${libraryId}`,
        page.getByRole("rowheader", { name: "Night" }),
        false,
      ],
      [
        "webhooks",
        `/console/webhooks?library=${libraryId}`,
        page.getByRole("rowheader", { name: "Everything" }),
        true,
      ],
    ] as const;
    const signedOut = await browser.newContext({ baseURL: app.baseUrl, colorScheme: "dark" });
    try {
      await page.emulateMedia({ colorScheme: "dark" });
      const signIn = await signedOut.newPage();
      await signIn.goto("/console/sign-in");
      for (const width of [1280, 390]) {
        await signIn.setViewportSize({ width, height: 800 });
        await signIn.getByLabel("Email").waitFor();
        // The same few elements at either width: checked once.
        if (width > 720) await expect(accessibilityViolations(signIn)).resolves.toEqual([]);
        await screenshot(signIn, `dark-sign-in-${width}`);
        await page.setViewportSize({ width, height: 800 });
        for (const [name, path, loaded, onPhone] of pages) {
          if (width < 720 && !onPhone) continue;
          await page.goto(path);
          await loaded.waitFor();
          await expect(accessibilityViolations(page), `${name} at ${width} px`).resolves.toEqual([]);
          await screenshot(page, `dark-${name}-${width}`);
        }
      }
      // A dialog over the page (the webhooks page, the last above).
      await page.getByRole("button", { name: "Add endpoint" }).click();
      await page.getByRole("dialog", { name: "Add endpoint" }).waitFor();
      await expect(accessibilityViolations(page)).resolves.toEqual([]);
      await screenshot(page, "dark-dialog-390");
    } finally {
      await signedOut.close();
      await page.setViewportSize({ width: 1280, height: 800 });
      await page.emulateMedia({ colorScheme: null });
    }
  });

  it("tells same-named libraries apart in the list and the delete confirmation, where a long name wraps (QA of 5 December, session 43)", async () => {
    const twins = [await createLibrary("Twin"), await createLibrary("Twin")];
    const long = `Long${"L".repeat(251)}`;
    await createLibrary(long);
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto("/console/libraries");
      for (const id of twins)
        await page.getByRole("rowheader", { name: `Twin (${id.slice(0, 8)})` }).waitFor();
      const dialog = page.getByRole("dialog", { name: "Delete library" });
      await page.getByRole("button", { name: `Delete Twin (${twins[1]?.slice(0, 8)})` }).click();
      await expect(dialog.locator("strong").textContent()).resolves.toBe(`Twin (${twins[1]?.slice(0, 8)})`);
      await dialog.getByRole("button", { name: "Cancel" }).click();
      // A name of 255 characters without a space is read whole inside the dialog.
      await page.getByRole("button", { name: `Delete ${long}` }).click();
      const [box, name] = await Promise.all([dialog.boundingBox(), dialog.locator("strong").boundingBox()]);
      expect(name && box && name.x + name.width <= box.x + box.width).toBe(true);
      await dialog.getByRole("button", { name: "Cancel" }).click();
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });

  it("puts the focus on a webhook's events when the API refuses them as a group (QA of 5 December, session 43)", async () => {
    await page.goto(`/console/webhooks?library=${libraryId}`);
    await page.getByRole("button", { name: "Add endpoint" }).click();
    const dialog = page.getByRole("dialog", { name: "Add endpoint" });
    await dialog.getByLabel("Name").fill("No events");
    await dialog.getByLabel("URL").fill("https://hooks.example.com/none");
    await dialog.getByLabel("All events").uncheck();
    await dialog.getByRole("button", { name: "Add endpoint" }).click();
    await dialog.locator('[data-field-error="events"]').waitFor();
    await waitUntil(async () => (await focused(page)).name === "events", 3_000, "the focus on the events");
    await dialog.getByRole("button", { name: "Cancel" }).click();
  });
});
