import type { Browser, BrowserContext, Page } from "playwright-core";
import { describe } from "vitest";
import { startTestApp, type TestApp } from "./app.ts";
import { browserMissing, launchBrowser, newConsoleContext, signInInBrowser } from "./browser.ts";
import { createConsoleUser } from "./console.ts";

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
 * A test file's browser with its first tab (signed in as `email` when one is given), closed with its
 * `ConsoleApp`; if the tab cannot be opened, it is closed here, so no Chromium is left running.
 */
async function launchConsole(baseUrl: string, email?: string): Promise<ConsoleTab & { browser: Browser }> {
  const browser = await launchBrowser();
  try {
    return { browser, ...(await openConsole(browser, baseUrl, email)) };
  } catch (error) {
    await browser.close();
    throw error;
  }
}

/** A console user to make when the app starts (`createConsoleUser`'s options). */
type ConsoleUser = Parameters<typeof createConsoleUser>[1];

/**
 * A test file's Cumulo app (it serves the console) with its console users made; the browser is
 * started once the file has made its data through the API, and closed with the app.
 */
export interface ConsoleApp extends TestApp {
  /** Starts the browser with its first tab (`launchConsole`), signed in as `email` when one is given. */
  launch(email?: string): Promise<ConsoleTab & { browser: Browser }>;
  /** Starts the browser alone, for a file that opens its tabs test by test (`openConsole`). */
  launchBrowser(): Promise<Browser>;
  /** Closes the browser, if one was started, then the app. */
  close(): Promise<void>;
}

/**
 * Starts a test file's app (`startTestApp`'s environment and options) and makes its console `users`.
 * If a user cannot be made, the app is closed here, so no app is left running.
 */
export async function startConsoleApp(
  env: Record<string, string> = {},
  { users = [], ...options }: Parameters<typeof startTestApp>[1] & { users?: ConsoleUser[] } = {},
): Promise<ConsoleApp> {
  const app = await startTestApp(env, options);
  let browser: Browser | undefined;
  try {
    for (const user of users) await createConsoleUser(app, user);
  } catch (error) {
    await app.close();
    throw error;
  }
  return {
    ...app,
    launch: async (email) => {
      const launched = await launchConsole(app.baseUrl, email);
      browser = launched.browser;
      return launched;
    },
    launchBrowser: async () => {
      browser = await launchBrowser();
      return browser;
    },
    close: async () => {
      await browser?.close();
      await app.close();
    },
  };
}
