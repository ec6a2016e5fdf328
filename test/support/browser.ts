import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import axe, { type AxeResults } from "axe-core";
import { type Browser, type BrowserContext, chromium, type Locator, type Page } from "playwright-core";
import { PASSWORD } from "./console.ts";

/** Debian's Chromium; the browser tests never download a browser of their own. */
export const CHROMIUM = process.env.CUMULO_TEST_CHROMIUM ?? "/usr/bin/chromium";

export const SCREENSHOTS = fileURLToPath(new URL("../../test-artifacts/screenshots/", import.meta.url));

/** Why the browser tests cannot run here, or `undefined` when they can. */
export function browserMissing(): string | undefined {
  if (existsSync(CHROMIUM)) return undefined;
  return `browser tests skipped: ${CHROMIUM} is missing. Install it with \`apt-get install chromium\` (or set CUMULO_TEST_CHROMIUM) and run \`npx vitest run --project console\`.`;
}

/**
 * Headless Chromium on a machine with a closed network: without the background-networking flags it
 * keeps trying to reach Google's services. Shared by the browser tests and the Lighthouse bench.
 */
export const CHROMIUM_FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      ...CHROMIUM_FLAGS,
      // The tests check that video plays; a headless browser has no user gesture to allow it.
      "--autoplay-policy=no-user-gesture-required",
    ],
  });
}

/** A fresh browser profile (its own cookies) at a laptop's screen size, able to use the clipboard. */
/** What the console's Content-Security-Policy refused, in every context made by `newConsoleContext`. */
export const policyViolations: string[] = [];

export async function newConsoleContext(browser: Browser, baseUrl: string): Promise<BrowserContext> {
  const context = await browser.newContext({ baseURL: baseUrl, viewport: { width: 1280, height: 800 } });
  context.on("console", (message) => {
    if (message.type() === "error" && message.text().includes("Content Security Policy")) {
      policyViolations.push(`${message.location().url}: ${message.text()}`);
    }
  });
  // Fail fast: a page element that is not there in 10 s is not coming.
  context.setDefaultTimeout(30_000);
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: baseUrl });
  return context;
}

/** Signs in from the console's start (which leads to its sign-in page) and waits for the libraries page. */
export async function signInInBrowser(
  page: Page,
  email: string,
  password = PASSWORD,
  consoleUrl = "/console/",
): Promise<void> {
  await page.goto(consoleUrl);
  await page.waitForURL("**/console/sign-in");
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL("**/console/libraries");
}

/** A full-page screenshot kept under test-artifacts/screenshots/ (git-ignored) for a person to look at. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: `${SCREENSHOTS}${name}.png`, fullPage: true });
}

/**
 * What axe-core finds against WCAG 2.1 A and AA on the page shown (contrast among them), plus
 * label-in-name (an experimental rule: a control's accessible name contains its visible text), as
 * "rule: element" lines. Injected through the test's own channel: the console's CSP refuses inline
 * scripts.
 */
export async function accessibilityViolations(page: Page): Promise<string[]> {
  await page.evaluate(axe.source);
  const results: AxeResults = await page.evaluate(() =>
    (globalThis as any).axe.run((globalThis as any).document, {
      runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] },
      rules: { "label-content-name-mismatch": { enabled: true } },
      // Only the violations are read: axe then details no passing element (faster).
      resultTypes: ["violations"],
    }),
  );
  return results.violations.flatMap((violation) =>
    violation.nodes.map((node) => `${violation.id}: ${node.target.join(" ")} (${node.failureSummary ?? ""})`),
  );
}

/** How wide the page is: no wider than the window when nothing scrolls sideways. */
export const pageWidth = (page: Page): Promise<number> =>
  page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth);

/** A port nobody listens on now, for the edge (the video's manifest URL names the edge's port). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (typeof address !== "object" || address === null) throw new Error("no port");
  return address.port;
}

/** Adds a WebVTT subtitle titled `title` (language en) on the video page shown, and waits for its row. */
export async function addSubtitle(page: Page, workDir: string, title: string): Promise<void> {
  const vtt = `${workDir}/en.vtt`;
  writeFileSync(vtt, "WEBVTT\n\n00:00.000 --> 00:02.000\nHello\n");
  await page.getByRole("button", { name: "Add subtitle" }).click();
  const adding = page.getByRole("dialog", { name: "Add subtitle" });
  await adding.getByLabel("Title").fill(title);
  await adding.getByLabel("Language").fill("en");
  await adding.getByLabel("File (WebVTT or SRT)").setInputFiles(vtt);
  await adding.getByRole("button", { name: "Save subtitle" }).click();
  await page.getByRole("rowheader", { name: title }).waitFor();
}

/**
 * Where an element's text wraps inside a word, as "end|start": every line break that does not
 * follow a space, a dot, a hyphen or a slash (each character's line read from its layout box; a
 * space at the end of a line has none).
 */
export function midWordBreaks(locator: Locator): Promise<string[]> {
  return locator.evaluate((element: any) => {
    const doc = element.ownerDocument;
    const texts = doc.createTreeWalker(element, 4 /* NodeFilter.SHOW_TEXT */);
    const breaks: string[] = [];
    let before = "";
    let lineTop: number | undefined;
    for (let node = texts.nextNode(); node; node = texts.nextNode()) {
      const text: string = node.textContent;
      for (let index = 0; index < text.length; index++) {
        const range = doc.createRange();
        range.setStart(node, index);
        range.setEnd(node, index + 1);
        const top: number | undefined = range.getClientRects()[0]?.top;
        const char = text.charAt(index);
        if (top !== undefined) {
          const wrapped = lineTop !== undefined && top > lineTop + 1;
          if (wrapped && !/[\s./-]$/.test(before) && !/\s/.test(char)) {
            breaks.push(`${before.slice(-8)}|${text.slice(index, index + 8)}`);
          }
          lineTop = top;
        }
        before += char;
      }
    }
    return breaks;
  });
}
