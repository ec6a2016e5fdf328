import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { addSubtitle, screenshot } from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";

const EMAIL = "phone-tables@example.invalid";
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 800 };
/** The narrowest a cell may be on a phone: a column of single letters was 10 to 30 px. */
const MIN_CELL_WIDTH = 120;

const LONG_NAME = "Quarterly broadcast archive of the european streaming team";
const LONG_URL = "http://127.0.0.1:9/hooks/cumulo/media-events/production/receiver-endpoint";
const LONG_HOST = "streaming.broadcastingcompanyeurope.example.com";

/** What a phone shows of each table of the page: cells too narrow, sideways overflow, actions off screen. */
function phoneProblems(page: Page): Promise<string[]> {
  return page.evaluate((minWidth) => {
    const document = (globalThis as any).document;
    const viewport = (globalThis as any).innerWidth;
    const problems: string[] = [];
    for (const table of document.querySelectorAll("main table")) {
      const caption = table.querySelector("caption")?.textContent ?? "a table";
      const wrap = table.closest(".table-wrap");
      if (wrap && wrap.scrollWidth > wrap.clientWidth + 1) {
        problems.push(`${caption}: ${wrap.scrollWidth - wrap.clientWidth} px hidden sideways`);
      }
      for (const cell of table.querySelectorAll("tbody th, tbody td")) {
        const box = cell.getBoundingClientRect();
        if (!cell.textContent.trim() || box.width === 0) continue;
        if (box.width < minWidth) {
          problems.push(
            `${caption}: "${cell.textContent.trim().slice(0, 30)}" in ${Math.round(box.width)} px`,
          );
        }
      }
      for (const control of table.querySelectorAll("tbody button, tbody a[href]")) {
        const box = control.getBoundingClientRect();
        if (box.left < 0 || box.right > viewport) {
          problems.push(
            `${caption}: ${control.getAttribute("aria-label") ?? control.textContent} off screen`,
          );
        }
      }
    }
    return problems;
  }, MIN_CELL_WIDTH);
}

/** The roles and names Chromium gives the page's parts: its accessibility tree, which a screen reader reads. */
async function accessibilityTree(page: Page): Promise<{ role: string; name: string }[]> {
  const session = await page.context().newCDPSession(page);
  try {
    const { nodes } = await session.send("Accessibility.getFullAXTree");
    return nodes.map((node: any) => ({ role: node.role?.value ?? "", name: node.name?.value ?? "" }));
  } finally {
    await session.detach();
  }
}

/**
 * Every DataTable at a phone's width: each row reads as a card, each cell at the card's width with
 * its column's name beside it, the actions at its foot. Before, the actions column stuck over the
 * other columns, which the table squeezed to slivers (a webhook's URL one letter wide) until it was
 * scrolled sideways.
 */
describeInBrowser("the console in Chromium: tables on a phone", () => {
  let app: ConsoleApp;
  let page: Page;
  let workDir: string;
  let libraryId: string;
  let videoId: string;
  /** Each page with tables, and what to do there before they show (open the deliveries, the purges). */
  const pages: { name: string; path: () => string; open?: () => Promise<void> }[] = [];

  beforeAll(async () => {
    workDir = mkdtempSync(join(tmpdir(), "cumulo-phone-tables-"));
    app = await startConsoleApp({ CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" }, { users: [{ email: EMAIL }] });
    const library = await app.request("POST", "/v1/media/libraries", { json: { name: LONG_NAME } });
    expect(library.status).toBe(201);
    libraryId = library.body.data.id;
    const video = await app.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
      json: { title: `${LONG_NAME}, part one` },
    });
    expect(video.status).toBe(201);
    videoId = video.body.data.id;
    const player = await app.request("POST", `/v1/media/libraries/${libraryId}/players`, {
      json: { name: `${LONG_NAME} player` },
    });
    expect(player.status).toBe(201);
    const endpoint = await app.request("POST", `/v1/media/libraries/${libraryId}/webhooks`, {
      json: { name: "Production receiver", url: LONG_URL, events: ["*"] },
    });
    expect(endpoint.status).toBe(201);
    const test = await app.request(
      "POST",
      `/v1/media/libraries/${libraryId}/webhooks/${endpoint.body.data.id}/test`,
    );
    expect(test.status).toBe(202);
    const distribution = await app.request("POST", "/v1/cdn/distributions", {
      json: { hostname: LONG_HOST, origin_url: "https://origin.broadcastingcompanyeurope.example.com/media" },
    });
    expect(distribution.status).toBe(201);
    const purge = await app.request("POST", `/v1/cdn/distributions/${distribution.body.data.id}/purges`, {
      json: { paths: ["/videos/quarterly-broadcast-archive/part-one/*"] },
    });
    expect(purge.status).toBeLessThan(300);
    const apiKey = await app.request("POST", "/v1/organization/api-keys", {
      json: { name: "deploy-pipeline" },
    });
    expect(apiKey.status).toBe(201);
    for (const [path, json] of [
      ["/v1/user-resource/token", { description: "continuous-deployment-pipeline" }],
      ["/v1/user-resource/vm", { name: "database-primary-eu", vcpu: 4, ram: 8192, password: "Secret123!" }],
      ["/v1/storage/disks", { size_gb: 50, display_name: "database-primary-eu-data" }],
      ["/v1/network/ip_addresses", { name: "frontend-eu" }],
      [
        "/v1/network/load_balancers",
        {
          display_name: "frontend-eu-balancer",
          forwarding_rules: [{ protocol: "TCP", source_port: 443, target_port: 8443 }],
        },
      ],
      ["/v1/storage/user/keys", undefined],
    ] as const) {
      const made = await app.cloud("POST", path, json ? { json } : {});
      expect(made.status, path).toBeLessThan(300);
    }

    ({ page } = await app.launch(EMAIL));
    await page.goto(`/console/libraries/${libraryId}/videos/${videoId}`);
    await addSubtitle(page, workDir, "English (closed captions for the hard of hearing)");

    pages.push(
      { name: "libraries", path: () => "/console/libraries" },
      { name: "videos", path: () => `/console/libraries/${libraryId}` },
      { name: "subtitles", path: () => `/console/libraries/${libraryId}/videos/${videoId}` },
      { name: "players", path: () => `/console/players?library=${libraryId}` },
      {
        name: "webhooks",
        path: () => `/console/webhooks?library=${libraryId}`,
        open: async () => {
          await page.getByRole("button", { name: "Deliveries of Production receiver" }).click();
          // The deliveries are a list of their own beside the endpoints' table: shown for the screenshots.
          await page
            .getByRole("list", { name: "Delivery attempts, newest first" })
            .locator("li")
            .first()
            .waitFor();
        },
      },
      {
        name: "cdn",
        path: () => "/console/cdn",
        open: async () => {
          await page.getByRole("button", { name: `Purges of ${LONG_HOST}` }).click();
          await page
            .getByRole("table", { name: `Purges of ${LONG_HOST}` })
            .locator("tbody tr")
            .waitFor();
        },
      },
      { name: "cloud-tokens", path: () => "/console/cloud" },
      { name: "cloud-vms", path: () => "/console/cloud/vms" },
      { name: "cloud-disks", path: () => "/console/cloud/disks" },
      { name: "cloud-ips", path: () => "/console/cloud/floating-ips" },
      { name: "cloud-lbs", path: () => "/console/cloud/load-balancers" },
      { name: "cloud-s3", path: () => "/console/cloud/object-storage" },
      { name: "keys", path: () => "/console/keys" },
    );
  });

  afterAll(async () => {
    await app?.close();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  /** Shows the page's tables with their rows. */
  async function show(shown: (typeof pages)[number]) {
    await page.goto(shown.path());
    await page.locator("main table tbody tr").first().waitFor();
    await shown.open?.();
  }

  it("shows every table's rows whole at 390 px, the actions on screen", async () => {
    await page.setViewportSize(PHONE);
    const problems: string[] = [];
    for (const shown of pages) {
      await show(shown);
      await screenshot(page, `phone-tables-${shown.name}-390`);
      problems.push(...(await phoneProblems(page)).map((problem) => `${shown.name}: ${problem}`));
    }
    expect(problems).toEqual([]);
    // The actions work from the card: Revoke opens its confirmation.
    await page.getByRole("button", { name: "Revoke deploy-pipeline" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Cancel" }).click();
  });

  it("keeps the tables tables for a screen reader on a phone", async () => {
    await page.setViewportSize(PHONE);
    await show(pages.find((shown) => shown.name === "webhooks") as (typeof pages)[number]);
    const tree = await accessibilityTree(page);
    const roles = new Set(tree.map((node) => node.role));
    for (const role of ["table", "row", "columnheader", "rowheader", "cell"]) expect(roles).toContain(role);
    expect(tree).toContainEqual({ role: "columnheader", name: "URL" });
    // The card's label is drawn, not said: the cell is its URL alone, named by its column's header
    // (Chromium spaces the URL's wrap points).
    const cells = tree.filter((node) => node.role === "cell").map((node) => node.name.replaceAll(" ", ""));
    expect(cells).toContain(LONG_URL);
    const url = page.getByRole("table", { name: "Webhook endpoints" }).locator("td", { hasText: LONG_URL });
    await expect(url.getAttribute("data-label")).resolves.toBe("URL");
    await expect(page.getByText("URL", { exact: true }).count()).resolves.toBe(1);
  });

  it("keeps the desktop's one row per line with the actions column at the right", async () => {
    await page.setViewportSize(DESKTOP);
    for (const shown of pages) {
      await show(shown);
      await screenshot(page, `phone-tables-${shown.name}-1280`);
    }
    await show(pages.find((shown) => shown.name === "keys") as (typeof pages)[number]);
    const row = page.getByRole("table", { name: "API keys" }).locator("tbody tr").first();
    const tops = await row
      .locator("th, td")
      .evaluateAll((cells: any[]) => cells.map((cell) => Math.round(cell.getBoundingClientRect().top)));
    expect(new Set(tops).size).toBe(1);
    await expect(page.locator("main thead").first().isVisible()).resolves.toBe(true);
  });

  it("keeps a tablet's table scrolling sideways beneath its actions column", async () => {
    await page.setViewportSize({ width: 800, height: 800 });
    await show(pages.find((shown) => shown.name === "cdn") as (typeof pages)[number]);
    const wrap = page.locator(".table-wrap", { has: page.getByRole("table", { name: "CDN distributions" }) });
    await expect(wrap.getAttribute("class")).resolves.toContain("table-overflowing");
    const [panel, remove] = [
      await wrap.boundingBox(),
      await page.getByRole("button", { name: `Delete ${LONG_HOST}` }).boundingBox(),
    ];
    expect((remove?.x ?? 0) + (remove?.width ?? 0)).toBeLessThanOrEqual(
      (panel?.x ?? 0) + (panel?.width ?? 0),
    );
    await screenshot(page, "phone-tables-cdn-800");
  });
});
