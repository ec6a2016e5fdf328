// Bundles the server's TypeScript (src/) into dist/, which bin/cumulo.js runs while it is newer than
// every source file: a command then starts without compiling TypeScript and resolving hundreds of
// files through tsx's loader (about 0.7 s of CPU per start). Packages stay external but for
// `BUNDLED_PACKAGES`, and modules imported lazily stay in chunks of their own (splitting), so a store
// command still loads no HTTP code.
import { rmSync, utimesSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = fileURLToPath(new URL("..", import.meta.url));

/**
 * Packages built into the bundle: plain JavaScript of hundreds of small modules each (Kysely about
 * 260, TypeBox about 250), which every start and every CLI command would otherwise open one by one.
 * Only the server's own code imports them (the TypeBox type provider only for its types), so no
 * second copy is loaded beside the bundled one. Packages that read files beside their code or start
 * workers stay external (docs/performance.md, sessions 37 and 38).
 */
const BUNDLED_PACKAGES = new Set(["kysely", "@sinclair/typebox"]);

/** The package a bare import names: `kysely`, `@sinclair/typebox` (of `@sinclair/typebox/value`). */
const packageOf = (specifier) =>
  specifier
    .split("/")
    .slice(0, specifier.startsWith("@") ? 2 : 1)
    .join("/");

const externalPackages = {
  name: "external-packages",
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, ({ path }) =>
      BUNDLED_PACKAGES.has(packageOf(path)) ? undefined : { path, external: true },
    );
  },
};

const outdir = `${root}dist`;

// Taken before esbuild reads a source: a file saved during the build is newer than the bundle.
const started = new Date();
rmSync(outdir, { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: ["src/main.ts"],
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  plugins: [externalPackages],
  sourcemap: "linked",
  // Stack traces need only the mappings; the sources themselves are in src/ and node_modules/.
  sourcesContent: false,
  logLevel: "warning",
});
// bin/cumulo.js runs the bundle only while no source is newer than this.
utimesSync(`${outdir}/main.js`, started, started);
