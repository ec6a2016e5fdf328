import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

const CLIENT_PACKAGE = resolve(dirname(fileURLToPath(import.meta.url)), "../../packages/client");

/** A small program of another project, as the README shows it, reaching media, cloud and developer-mode routes. */
const CONSUMER = `import { createCumuloClient } from "@cumulo/client";

export async function run(baseUrl: string, apiKey: string) {
  const cumulo = createCumuloClient({ baseUrl, apiKey });
  const { data, error } = await cumulo.GET("/v1/media/libraries", { params: { query: { page: 1, limit: 10 } } });
  if (error) throw new Error(error.message);
  const names: string[] = data.data.map((library) => library.name);
  const disk = await cumulo.POST("/v1/cloud/{location}/storage/disks", {
    params: { path: { location: "local-1" } },
    body: { size_gb: 2 },
  });
  if (disk.error) throw new Error(disk.error.message);
  const size: number = disk.data.size_gb;
  const user = await cumulo.GET("/v1/cloud/storage/user", {});
  // Developer mode's routes are typed too.
  const listed = await cumulo.GET("/_cumulo/state/snapshots", {});
  if (listed.error) throw new Error(listed.error.message);
  const snapshots: string[] = listed.data.snapshots.map((snapshot) => snapshot.name);
  // A reset to the bootstrap state takes no body: none is sent, nor a Content-Type.
  const reset = await cumulo.POST("/_cumulo/state/reset", {});
  if (reset.error) throw new Error(reset.error.message);
  return { names, size, buckets: user.data?.maxBuckets, snapshots, reset: reset.data.done };
}
`;

// The package and its types are the same whatever the store: checked once (three type-checks take
// most of a minute).
describe.runIf(process.env.CUMULO_TEST_STORE !== "postgres")(
  "the typed client as another project installs it",
  () => {
    let t: TestApp;
    let project: string;

    beforeAll(async () => {
      t = await startTestApp({ CUMULO_DEV_MODE: "true" });
      project = mkdtempSync(join(tmpdir(), "cumulo-client-consumer-"));
      // The package as `npm install` puts it in a project: its package.json and its build (made here
      // from the package's own tsconfig, so a stale dist/ of this checkout cannot hide a change), and
      // its dependency beside it.
      const installed = join(project, "node_modules", "@cumulo", "client");
      mkdirSync(installed, { recursive: true });
      copyFileSync(join(CLIENT_PACKAGE, "package.json"), join(installed, "package.json"));
      const config = ts.getParsedCommandLineOfConfigFile(
        join(CLIENT_PACKAGE, "tsconfig.json"),
        { outDir: join(installed, "dist") },
        { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} },
      );
      if (!config) throw new Error("packages/client/tsconfig.json could not be read");
      const built = ts.createProgram(config.fileNames, config.options).emit();
      expect(built.emitSkipped).toBe(false);
      copyFileSync(join(CLIENT_PACKAGE, "src", "schema.d.ts"), join(installed, "dist", "schema.d.ts"));
      const openapiFetch = dirname(
        createRequire(join(CLIENT_PACKAGE, "package.json")).resolve("openapi-fetch/package.json"),
      );
      symlinkSync(openapiFetch, join(project, "node_modules", "openapi-fetch"), "dir");
      writeFileSync(join(project, "package.json"), JSON.stringify({ type: "module" }));
      writeFileSync(join(project, "consumer.ts"), CONSUMER);
    });
    afterAll(async () => {
      await t?.close();
      if (project) rmSync(project, { recursive: true, force: true });
    });

    it.each([
      ["node10", ts.ModuleKind.ES2022, ts.ModuleResolutionKind.Node10],
      ["node16", ts.ModuleKind.Node16, ts.ModuleResolutionKind.Node16],
      ["bundler", ts.ModuleKind.ESNext, ts.ModuleResolutionKind.Bundler],
    ])(
      "type-checks with %s module resolution, its declarations included",
      (_name, module, moduleResolution) => {
        const program = ts.createProgram([join(project, "consumer.ts")], {
          target: ts.ScriptTarget.ES2022,
          module,
          moduleResolution,
          lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: [],
        });
        const problems = ts
          .getPreEmitDiagnostics(program)
          .map((diagnostic) => ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
        expect(problems).toEqual([]);
      },
      120_000,
    );

    it("runs against the server", async () => {
      const { outputText } = ts.transpileModule(CONSUMER, {
        compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
      });
      writeFileSync(join(project, "consumer.js"), outputText);
      const consumer = await import(pathToFileURL(join(project, "consumer.js")).href);
      expect(await consumer.run(t.baseUrl, t.adminKey)).toEqual({
        names: [],
        size: 2,
        buckets: 1000,
        snapshots: [],
        reset: true,
      });
    });
  },
);
