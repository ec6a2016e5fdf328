import type { IncomingMessage, ServerResponse } from "node:http";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  createDistribution,
  EDGE_ENV,
  edgeRequest,
  edgeUrlOf,
  type Origin,
  startOrigin,
  TestClock,
  uniqueHost,
} from "../cdn/support.ts";
import { accessibilityViolations, policyViolations, screenshot } from "../support/browser.ts";
import { type ConsoleApp, describeInBrowser, startConsoleApp } from "../support/console-browser.ts";
import { waitUntil } from "../support/wait.ts";

const EMAIL = "ops@example.invalid";
const TWO_DAYS_MS = 2 * 24 * 3600 * 1000;

/**
 * A period whose only traffic is a background revalidation (docs/cdn.md, Analytics): the edge asked
 * the origin, but no viewer asked the edge. Made through the real edge: a copy fetched and made stale
 * two days ago (by the server's clock), and its revalidation held at the origin until the clock is
 * back at the present, so it ends, and is counted, in this hour alone.
 */
describeInBrowser("the console in Chromium: CDN analytics of a period with only origin traffic", () => {
  const clock = new TestClock();
  let app: ConsoleApp;
  let origin: Origin;
  let page: Page;
  let revalidated: { hostname: string };
  let untouched: { hostname: string };

  beforeAll(async () => {
    clock.advance(-TWO_DAYS_MS);
    origin = await startOrigin();
    app = await startConsoleApp(
      { ...EDGE_ENV, CUMULO_EDGE_ANALYTICS_FLUSH_MS: "200", CUMULO_EDGE_ORIGIN_TIMEOUT_MS: "30000" },
      { clock, users: [{ email: EMAIL }] },
    );
    revalidated = await createDistribution(app, {
      hostname: uniqueHost("revalidated"),
      origin_url: `${origin.url}/root`,
    });
    untouched = await createDistribution(app, {
      hostname: uniqueHost("untouched"),
      origin_url: origin.url,
    });

    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let asked = 0;
    origin.route("/root/swr.txt", async (_req: IncomingMessage, res: ServerResponse) => {
      asked += 1;
      if (asked > 1) await released;
      res.writeHead(200, { "cache-control": "max-age=1, stale-while-revalidate=60" }).end(`v${asked}`);
    });
    const get = () => edgeRequest(edgeUrlOf(app), `/${revalidated.hostname}/swr.txt`);
    expect((await get()).headers["x-cache"]).toBe("MISS");
    clock.advance(1500);
    // The stale copy answers at once; its revalidation waits at the origin.
    expect((await get()).headers["x-cache"]).toBe("HIT");
    await waitUntil(() => asked === 2, 15_000, "the background revalidation at the origin");
    clock.advance(TWO_DAYS_MS - 1500);
    release();

    const lastHour = `from=${new Date(clock.now().getTime() - 3600_000).toISOString()}&to=${clock.now().toISOString()}`;
    await waitUntil(
      async () => {
        const answer = await app.request(
          "GET",
          `/v1/cdn/analytics?${lastHour}&granularity=1h&distribution=${revalidated.hostname}`,
        );
        return answer.body.Data.some(
          (bucket: { upstream_origin_time_ms: number }) => bucket.upstream_origin_time_ms > 0,
        );
      },
      15_000,
      "the revalidation counted in the last hour",
    );

    ({ page } = await app.launch(EMAIL));
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await origin?.close();
  });

  it("shows the origin's time with a note that no viewer asked, not 'No traffic in this period.'", async () => {
    await page.goto(`/console/cdn/analytics?range=1h&granularity=1m&distribution=${revalidated.hostname}`);
    const note = page.getByText("No viewer requests in this period");
    await note.waitFor();
    await expect(note.textContent()).resolves.toBe(
      "No viewer requests in this period, so nothing was sent to viewers. The edge still asked the origin, " +
        "revalidating stale copies in the background (stale-while-revalidate); how long the origin took is " +
        "charted below.",
    );
    await expect(page.getByText("No traffic in this period.").count()).resolves.toBe(0);
    // Only the origin's chart: the viewers' would all be flat at 0.
    await expect(
      page.locator("figure.chart").evaluateAll((charts) => charts.map((chart) => chart.dataset.metric)),
    ).resolves.toEqual(["upstream_origin_time_ms"]);
    const originTime = page.locator('[data-metric-total="upstream_origin_time_ms"]');
    await expect(originTime.textContent()).resolves.toMatch(/^highest \d/);
    expect(Number(await originTime.getAttribute("data-value"))).toBeGreaterThan(0);
    await expect(accessibilityViolations(page)).resolves.toEqual([]);
    await screenshot(page, "cdn-analytics-origin-only");
  });

  it("still says 'No traffic in this period.' of a distribution nobody and nothing asked", async () => {
    await page.getByLabel("Distribution").selectOption(untouched.hostname);
    await page.getByText("No traffic in this period.").waitFor();
    await expect(page.getByText("No viewer requests in this period").count()).resolves.toBe(0);
    await expect(page.locator("figure.chart").count()).resolves.toBe(0);
  });

  it("breaks none of the console's Content-Security-Policy", () => {
    expect(policyViolations).toEqual([]);
  });
});
