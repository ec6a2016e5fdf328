import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { browserMissing } from "../support/browser.ts";

/**
 * Builds the console once before the browser tests, so they never run against the output of an
 * earlier build (web/dist is also what `npm start` serves).
 */
export function setup() {
  if (browserMissing()) return;
  const root = fileURLToPath(new URL("../..", import.meta.url));
  // vitest sets NODE_ENV=test, which would give React's development build: build as `npm ci` does.
  execFileSync("npm", ["run", "--silent", "console:build"], {
    cwd: root,
    stdio: "ignore",
    env: { ...process.env, NODE_ENV: "production" },
  });
}
