import { spawnSync } from "node:child_process";
import {
  copyFileSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testStoreKind } from "../support/store.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/**
 * `bin/cumulo.js` picks the bundle or the TypeScript sources. A checkout of its own here: the real
 * bin, node_modules linked, and a `main` in each place that says which one ran.
 */
describe.runIf(testStoreKind() === "sqlite")(
  "bin/cumulo.js: the bundle while it is fresh, else the sources",
  () => {
    let checkout: string;
    const run = () => {
      const result = spawnSync(process.execPath, [join(checkout, "bin", "cumulo.js")], { encoding: "utf8" });
      expect(result.stderr).toBe("");
      return result.stdout.trim();
    };
    const built = (at: Date) => utimesSync(join(checkout, "dist", "main.js"), at, at);

    beforeAll(() => {
      checkout = mkdtempSync(join(tmpdir(), "cumulo-bin-"));
      for (const dir of ["bin", "dist", "src/media"]) mkdirSync(join(checkout, dir), { recursive: true });
      copyFileSync(join(ROOT, "bin", "cumulo.js"), join(checkout, "bin", "cumulo.js"));
      symlinkSync(join(ROOT, "node_modules"), join(checkout, "node_modules"));
      writeFileSync(join(checkout, "package.json"), '{"type":"module"}');
      const main = (which: string) => `export async function main() { console.log("${which}"); }\n`;
      writeFileSync(join(checkout, "src", "main.ts"), main("sources"));
      writeFileSync(join(checkout, "src", "media", "service.ts"), "export {};\n");
      writeFileSync(join(checkout, "dist", "main.js"), main("bundle"));
    });
    afterAll(() => rmSync(checkout, { recursive: true, force: true }));

    it("runs the bundle when no source is newer, and the sources once one is", () => {
      built(new Date(Date.now() + 60_000));
      expect(run()).toBe("bundle");
      built(new Date(Date.now() - 60_000));
      expect(run()).toBe("sources");
    });

    it("takes an editor's lock link to nowhere for a change, not a reason to crash", () => {
      const link = join(checkout, "src", "media", ".#service.ts");
      symlinkSync("someone@host.1234:1700000000", link);
      try {
        built(new Date(Date.now() + 60_000));
        expect(run()).toBe("bundle");
        // The link is newer than a bundle built before it.
        built(new Date(Date.now() - 60_000));
        expect(run()).toBe("sources");
      } finally {
        rmSync(link);
      }
    });

    it("sees a source removed from src/ itself", () => {
      const extra = join(checkout, "src", "extra.ts");
      writeFileSync(extra, "export {};\n");
      const before = new Date(Date.now() - 60_000);
      for (const path of [
        extra,
        join(checkout, "src"),
        join(checkout, "src", "media"),
        join(checkout, "src", "main.ts"),
      ]) {
        utimesSync(path, before, before);
      }
      built(new Date());
      expect(run()).toBe("bundle");
      rmSync(extra);
      expect(run()).toBe("sources");
    });

    it("runs the bundle of an installed package whatever its files' times", () => {
      // A tarball's files arrive with the install's times, the sources newer than the bundle: an
      // installed Cumulo ran its sources through tsx (QA of 4 December).
      const project = mkdtempSync(join(tmpdir(), "cumulo-bin-project-"));
      try {
        const installed = join(project, "node_modules", "cumulo");
        cpSync(checkout, installed, { recursive: true, verbatimSymlinks: true });
        utimesSync(
          join(installed, "dist", "main.js"),
          new Date(Date.now() - 60_000),
          new Date(Date.now() - 60_000),
        );
        const runInstalled = () =>
          spawnSync(process.execPath, [join(installed, "bin", "cumulo.js")], {
            encoding: "utf8",
          }).stdout.trim();
        expect(runInstalled()).toBe("bundle");
        rmSync(join(installed, "dist", "main.js"));
        expect(runInstalled()).toBe("sources");
      } finally {
        rmSync(project, { recursive: true, force: true });
      }
    });
  },
);
