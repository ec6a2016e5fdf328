import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const UNIT = fileURLToPath(new URL("../../deploy/systemd/cumulo.service", import.meta.url));

it("ships a systemd unit that runs `cumulo serve` with the drain docs/operations.md asks for", () => {
  const unit = readFileSync(UNIT, "utf8");
  expect(unit).toMatch(/^ExecStart=\/usr\/bin\/node \/opt\/cumulo\/bin\/cumulo\.js serve$/m);
  expect(unit).toMatch(/^KillSignal=SIGTERM$/m);
  expect(unit).toMatch(/^TimeoutStopSec=30$/m);
  expect(unit).toMatch(/^EnvironmentFile=\/etc\/cumulo\/common\.env$/m);
});

// systemd's own parser, where this machine has it (Debian's systemd package).
it.runIf(existsSync("/usr/bin/systemd-analyze") && existsSync("/usr/bin/node"))(
  "is a unit systemd reads without a complaint",
  () => {
    const verified = spawnSync("systemd-analyze", ["verify", UNIT], { encoding: "utf8" });
    expect([verified.status, verified.stderr]).toEqual([0, ""]);
  },
);
