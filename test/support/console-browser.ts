import type { Browser, BrowserContext, Page } from "playwright-core";
import { describe } from "vitest";
import { browserMissing, launchBrowser, newConsoleContext, signInInBrowser } from "./browser.ts";

/**
 * `describe` for the console's browser tests: where Chromium is missing, its tests are skipped and
 * the reason (with how to install it) is said once.
 */
export function describeInBrowser(name: string, tests: () => void): void {
  const missing = browserMissing();
  if (missing) console.warn(missing);
  describe.skipIf(missing)(name, tests);
}

/** A console tab in a browser profile of its own (its own cookies). */
export interface ConsoleTab {
  context: BrowserContext;
  page: Page;
}

/** A tab of a fresh profile (`newConsoleContext`), signed in as `email` when one is given. */
export async function openConsole(browser: Browser, baseUrl: string, email?: string): Promise<ConsoleTab> {
  const context = await newConsoleContext(browser, baseUrl);
  const page = await context.newPage();
  if (email !== undefined) await signInInBrowser(page, email);
  return { context, page };
}

/**
 * A test file's browser with its first tab (signed in as `email` when one is given). The file closes
 * the browser when done; if the tab cannot be opened, it is closed here, so no Chromium is left running.
 */
export async function launchConsole(
  baseUrl: string,
  email?: string,
): Promise<ConsoleTab & { browser: Browser }> {
  const browser = await launchBrowser();
  try {
    return { browser, ...(await openConsole(browser, baseUrl, email)) };
  } catch (error) {
    await browser.close();
    throw error;
  }
}
