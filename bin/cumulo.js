#!/usr/bin/env node
// Runs the bundle `npm ci` builds (dist/, scripts/build-server.mjs) when it is newer than every file
// under src/; otherwise (a source edited since, or no bundle) the TypeScript sources through tsx.
import { existsSync, readdirSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";

const bundle = new URL("../dist/main.js", import.meta.url);
const sources = fileURLToPath(new URL("../src/", import.meta.url));

function bundleIsFresh() {
  if (!existsSync(bundle)) return false;
  const built = statSync(bundle).mtimeMs;
  return readdirSync(sources, { recursive: true }).every((name) => statSync(sources + name).mtimeMs <= built);
}

let main;
if (bundleIsFresh()) {
  // Stack traces in logs name the TypeScript files and lines.
  process.setSourceMapsEnabled(true);
  ({ main } = await import(bundle.href));
} else {
  const { register } = await import("tsx/esm/api");
  register();
  ({ main } = await import("../src/main.ts"));
}
await main(process.argv);
