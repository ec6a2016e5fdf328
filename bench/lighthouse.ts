import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as chromeLauncher from "chrome-launcher";
import lighthouse from "lighthouse";
import desktopConfig from "lighthouse/core/config/desktop-config.js";
import { type Browser, chromium, type Page } from "playwright-core";
import { CHROMIUM, CHROMIUM_FLAGS, signInInBrowser } from "../test/support/browser.ts";
import { BENCH_KEY, formatRow, startBenchCumulo } from "./support.ts";

/**
 * Lighthouse (npm `lighthouse`, desktop preset) on the console's sign-in, library and CDN analytics
 * pages (issue 12) and the webhooks and cloud pages, in Debian's Chromium against a started Cumulo
 * serving the freshly built console. The sign-in page is scored first; then a console user signs in
 * through that page in the same browser (playwright-core over the DevTools protocol), as a person
 * would: the console only uses sessions it started itself (a mark in its localStorage, docs/console.md),
 * so a session cookie handed to Lighthouse alone is refused. The signed-in pages are scored with
 * Lighthouse's storage reset off (it would sign the user out) and the HTTP cache cleared before each,
 * so they load as cold as the sign-in page. Prints the four category scores of each page and fails
 * when accessibility or best practices is under 95 (issue 12).
 */
const MINIMUM = 95;
const EMAIL = "lighthouse@example.invalid";
const PASSWORD = "lighthouse bench password";
const CATEGORIES = ["performance", "accessibility", "best-practices", "seo"] as const;

const root = fileURLToPath(new URL("..", import.meta.url));
console.log("building the console (npm run console:build) ...");
execFileSync("npm", ["run", "--silent", "console:build"], { cwd: root, stdio: "ignore" });

const bench = await startBenchCumulo("sqlite", { CUMULO_ROLES: "api" });
const chrome = await chromeLauncher.launch({
  chromePath: CHROMIUM,
  chromeFlags: ["--headless=new", ...CHROMIUM_FLAGS],
});
let failed = false;
/** playwright-core's connection to the same Chromium, for the sign-in Lighthouse's pages then use. */
let devtoolsClient: Browser | undefined;
let signedInTab: Page | undefined;
try {
  const base = bench.cumulo.apiUrl ?? "";
  const admin = { authorization: `Bearer ${BENCH_KEY}`, "content-type": "application/json" };
  const auth = await bench.cumulo.services.identity.authenticate(BENCH_KEY);
  if (!auth) throw new Error("bench key not accepted");
  const user = await bench.cumulo.services.console.createUser({
    organizationId: auth.organizationId,
    email: EMAIL,
    readOnly: false,
    password: PASSWORD,
  });
  if (user.outcome !== "created") throw new Error(`console user: ${user.outcome}`);
  const library = await fetch(`${base}/v1/media/libraries`, {
    method: "POST",
    headers: admin,
    body: JSON.stringify({ name: "Lighthouse library" }),
  });
  const libraryId = ((await library.json()) as { data: { id: string } }).data.id;

  const pages = [
    { name: "sign-in", path: "/console/sign-in", signedIn: false },
    { name: "library", path: `/console/libraries/${libraryId}`, signedIn: true },
    { name: "cdn analytics", path: "/console/cdn/analytics", signedIn: true },
    { name: "webhooks", path: `/console/webhooks?library=${libraryId}`, signedIn: true },
    { name: "cloud", path: "/console/cloud", signedIn: true },
  ];
  const widths = [16, 13, 15, 16, 6];
  console.log(formatRow(["page", "performance", "accessibility", "best practices", "seo"], widths));
  for (const page of pages) {
    if (page.signedIn && !signedInTab) {
      devtoolsClient = await chromium.connectOverCDP(`http://127.0.0.1:${chrome.port}`);
      const context = devtoolsClient.contexts()[0];
      if (!context) throw new Error("the browser has no default context");
      signedInTab = await context.newPage();
      await signInInBrowser(signedInTab, EMAIL, PASSWORD, `${base}/console/`);
    }
    if (signedInTab) {
      const devtools = await signedInTab.context().newCDPSession(signedInTab);
      await devtools.send("Network.clearBrowserCache");
      await devtools.detach();
    }
    const result = await lighthouse(
      `${base}${page.path}`,
      {
        port: chrome.port,
        output: "json",
        logLevel: "error",
        onlyCategories: [...CATEGORIES],
        disableStorageReset: page.signedIn,
      },
      desktopConfig,
    );
    if (!result) throw new Error(`lighthouse gave no result for ${page.path}`);
    const { categories, finalDisplayedUrl } = result.lhr;
    if (page.signedIn && finalDisplayedUrl.includes("/sign-in")) {
      throw new Error(`${page.path} was sent to the sign-in page: the session cookie was not used`);
    }
    const scores = CATEGORIES.map((id) => Math.round((categories[id]?.score ?? 0) * 100));
    console.log(formatRow([page.name, ...scores], widths));
    for (const id of ["accessibility", "best-practices"] as const) {
      const category = categories[id];
      if ((category?.score ?? 0) * 100 >= MINIMUM) continue;
      failed = true;
      const audits = (category?.auditRefs ?? [])
        .map((ref) => result.lhr.audits[ref.id])
        .filter(
          (audit) =>
            audit && audit.score !== null && audit.score < 1 && audit.scoreDisplayMode !== "notApplicable",
        );
      console.log(
        `  ${page.name}: ${id} under ${MINIMUM}; failing audits: ${audits.map((audit) => audit?.id).join(", ")}`,
      );
    }
  }
} finally {
  await devtoolsClient?.close();
  chrome.kill();
  await bench.close();
}
if (failed) {
  console.log(`FAILED: accessibility and best practices must be at least ${MINIMUM} on every page`);
  process.exit(1);
}
