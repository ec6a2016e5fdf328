#!/usr/bin/env node
// Runs the bundle `npm ci` builds (dist/, scripts/build-server.mjs) when it is newer than every file
// under src/, or whenever it exists in an installed package (under node_modules: nobody edits that,
// and a tarball's files arrive with the install's own times, the sources newer than the bundle);
// otherwise (a source edited since, or no bundle) the TypeScript sources through tsx.
import { existsSync, lstatSync, readdirSync } from "node:fs";
import { sep } from "node:path";
import { fileURLToPath } from "node:url";

const bundle = new URL("../dist/main.js", import.meta.url);
const sources = fileURLToPath(new URL("../src/", import.meta.url));

/**
 * The bundle carries its build's start time: a source saved since, a file added or removed (src/ and
 * each folder change too), is newer. Symlinks count by their own time (an editor's lock link may
 * point nowhere); anything that cannot be read means "not fresh". Content copied in with an older
 * time (`cp -p`) is not seen: `npm run build:server` after such a copy.
 */
function bundleIsFresh() {
  try {
    const built = lstatSync(bundle).mtimeMs;
    const names = ["", ...readdirSync(sources, { recursive: true })];
    return names.every((name) => lstatSync(sources + name).mtimeMs <= built);
  } catch {
    return false;
  }
}

const installed = fileURLToPath(import.meta.url)
  .split(sep)
  .includes("node_modules");

let main;
if ((installed && existsSync(bundle)) || bundleIsFresh()) {
  // Stack traces in logs name the TypeScript files and lines.
  process.setSourceMapsEnabled(true);
  ({ main } = await import(bundle.href));
} else {
  const { register } = await import("tsx/esm/api");
  register();
  ({ main } = await import("../src/main.ts"));
}
await main(process.argv);
