import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/cli.ts";
import { testStoreKind } from "../support/store.ts";

const immutable = (path: string, on: boolean) =>
  execFileSync("chattr", [on ? "+i" : "-i", path], { stdio: "ignore" });

/** Whether `chattr +i` works here and stops even root from writing (ext4 does; tmpfs and overlays may not). */
function immutableFilesRefuseWrites(): boolean {
  const dir = mkdtempSync(join(tmpdir(), "cumulo-chattr-"));
  const file = join(dir, "probe");
  writeFileSync(file, "");
  try {
    immutable(file, true);
    try {
      writeFileSync(file, "x");
      return false;
    } catch {
      return true;
    } finally {
      immutable(file, false);
    }
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/*
 * A SQLite store file the node cannot write: owned by another user (a `cumulo migrate` or restore run
 * as root), on a file system mounted read-only, or immutable. SQLite then opens it read-only without
 * a word; the node said it was ready and answered every write, and most reads, with 500.
 */
describe.runIf(testStoreKind() === "sqlite" && immutableFilesRefuseWrites())(
  "an unwritable SQLite store",
  () => {
    it("stops start-up with one line naming the file and what to change", async () => {
      const dataDir = mkdtempSync(join(tmpdir(), "cumulo-unwritable-"));
      const file = join(dataDir, "cumulo.sqlite");
      try {
        expect((await runCli(["migrate"], { CUMULO_DATA_DIR: dataDir })).code).toBe(0);
        immutable(file, true);
        const refused = await runCli(["migrate"], { CUMULO_DATA_DIR: dataDir });
        expect(refused.code).not.toBe(0);
        expect(refused.stderr).toMatch(
          /^cumulo: cannot open the store \(CUMULO_DATA_DIR\): .*cumulo\.sqlite cannot be written by this process \(EPERM\)/,
        );
      } finally {
        immutable(file, false);
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
  },
);
