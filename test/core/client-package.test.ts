import { execFile, execFileSync } from "node:child_process";
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
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

interface ReadmeExample {
  /** File name in the consumer project, numbered in the README's order. */
  file: string;
  source: string;
  /** False for an example marked `<!-- not run: why -->` (one that needs a browser). */
  runs: boolean;
}

/** The ```ts blocks of the package's README, each a module of its own. */
function readmeExamples(): ReadmeExample[] {
  const readme = readFileSync(join(CLIENT_PACKAGE, "README.md"), "utf8");
  return [...readme.matchAll(/(<!-- not run: [^>]*-->\n)?```ts\n([\s\S]*?)\n```/g)].map((match, index) => ({
    file: `readme-${index + 1}.ts`,
    // `export {}` keeps an example's names out of the others' scope even without an import.
    source: `${match[2]}\nexport {};\n`,
    runs: match[1] === undefined,
  }));
}

/** Links a package of this checkout into the consumer project, as `npm install` would put it there. */
function linkDependency(project: string, name: string) {
  const location = dirname(
    createRequire(join(CLIENT_PACKAGE, "package.json")).resolve(`${name}/package.json`),
  );
  mkdirSync(dirname(join(project, "node_modules", name)), { recursive: true });
  symlinkSync(location, join(project, "node_modules", name), "dir");
}

// The package and its types are the same whatever the store: checked once (three type-checks take
// most of a minute).
describe.runIf(process.env.CUMULO_TEST_STORE !== "postgres")(
  "the typed client as another project installs it",
  () => {
    const examples = readmeExamples();
    let t: TestApp;
    let project: string;
    let packed: string[];

    beforeAll(async () => {
      t = await startTestApp({ CUMULO_DEV_MODE: "true" });
      project = mkdtempSync(join(tmpdir(), "cumulo-client-consumer-"));
      // The package as `npm pack` makes it and `npm install` unpacks it: its files and a build made
      // here from its own tsconfig (so a stale dist/ of this checkout cannot hide a change), packed
      // by npm itself, which decides what goes in (`files`, and the README always).
      const staging = join(project, "staging");
      mkdirSync(staging);
      for (const file of ["package.json", "README.md"])
        copyFileSync(join(CLIENT_PACKAGE, file), join(staging, file));
      cpSync(join(CLIENT_PACKAGE, "src"), join(staging, "src"), { recursive: true });
      const config = ts.getParsedCommandLineOfConfigFile(
        join(CLIENT_PACKAGE, "tsconfig.json"),
        { outDir: join(staging, "dist") },
        { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} },
      );
      if (!config) throw new Error("packages/client/tsconfig.json could not be read");
      const built = ts.createProgram(config.fileNames, config.options).emit();
      expect(built.emitSkipped).toBe(false);
      copyFileSync(join(CLIENT_PACKAGE, "src", "schema.d.ts"), join(staging, "dist", "schema.d.ts"));
      // --ignore-scripts: the package's prepack would build again, with a tsc this folder does not have.
      const [pack] = JSON.parse(
        execFileSync("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", project], {
          cwd: staging,
          encoding: "utf8",
        }),
      ) as { filename: string; files: { path: string }[] }[];
      packed = pack.files.map((file) => file.path);
      const installed = join(project, "node_modules", "@cumulo", "client");
      mkdirSync(installed, { recursive: true });
      execFileSync("tar", ["-xzf", join(project, pack.filename), "-C", installed, "--strip-components=1"]);
      linkDependency(project, "openapi-fetch");
      // What the README's examples use beside the client: Node's types and tus-js-client.
      linkDependency(project, "@types/node");
      linkDependency(project, "tus-js-client");
      writeFileSync(join(project, "package.json"), JSON.stringify({ type: "module" }));
      writeFileSync(join(project, "consumer.ts"), CONSUMER);
      for (const example of examples) writeFileSync(join(project, example.file), example.source);
    });
    afterAll(async () => {
      await t?.close();
      if (project) rmSync(project, { recursive: true, force: true });
    });

    it("is packed with its README, its build and its sources", () => {
      expect(packed.sort()).toEqual([
        "README.md",
        "dist/index.d.ts",
        "dist/index.js",
        "dist/schema.d.ts",
        "package.json",
        "src/index.ts",
        "src/schema.d.ts",
      ]);
      expect(existsSync(join(project, "node_modules", "@cumulo", "client", "README.md"))).toBe(true);
      expect(examples.filter((example) => example.runs).length).toBeGreaterThan(0);
    });

    it.each([
      ["node10", ts.ModuleKind.ES2022, ts.ModuleResolutionKind.Node10],
      ["node16", ts.ModuleKind.Node16, ts.ModuleResolutionKind.Node16],
      ["bundler", ts.ModuleKind.ESNext, ts.ModuleResolutionKind.Bundler],
    ])(
      "type-checks with %s module resolution, its declarations and the README's examples included",
      (_name, module, moduleResolution) => {
        const files = ["consumer.ts", ...examples.map((example) => example.file)];
        const program = ts.createProgram(
          files.map((file) => join(project, file)),
          {
            target: ts.ScriptTarget.ES2022,
            module,
            moduleResolution,
            lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
            strict: true,
            noEmit: true,
            skipLibCheck: false,
            types: ["node"],
          },
        );
        const problems = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
          const where = diagnostic.file
            ? `${diagnostic.file.fileName.slice(project.length + 1)}:${diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0).line + 1}: `
            : "";
          return where + ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
        });
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

    it("runs the README's examples against the server", async () => {
      // The upload example sends this file; any bytes do for an upload (processing fails later).
      writeFileSync(join(project, "clip.mp4"), "not really a video");
      const printed: string[] = [];
      for (const example of examples.filter((candidate) => candidate.runs)) {
        const { outputText } = ts.transpileModule(example.source, {
          compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
        });
        const script = join(project, example.file.replace(/\.ts$/, ".js"));
        writeFileSync(script, outputText);
        // A child process, as a reader runs it; asynchronous, so this process's server can answer it.
        const { stdout, stderr } = await promisify(execFile)(process.execPath, [script], {
          cwd: project,
          env: { PATH: process.env.PATH, CUMULO_URL: t.baseUrl, CUMULO_KEY: t.adminKey },
        });
        expect({ example: example.file, stderr }).toEqual({ example: example.file, stderr: "" });
        printed.push(...stdout.split("\n"));
      }
      // What the README's comments say these examples print.
      expect(printed).toContain("400 Invalid Request");
      expect(printed).toContain("Resource not found");
      expect(printed).toContain("202 uploading");
      expect(printed).toContain("0 healthy 1");
    });
  },
);
