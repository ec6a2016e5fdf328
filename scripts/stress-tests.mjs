#!/usr/bin/env node
/**
 * Runs test files again and again, several runs at once, to bring out the failures that depend on
 * timing: a race that one run on a quiet machine passes may fail once a few runs share the CPU
 * (docs/performance.md, session 39: a 500 seen once, then in none of 30 single runs, failed 8 runs
 * in 100 four at a time).
 *
 *   npm run stress -- test/resilience/races.test.ts --project postgres
 *   STRESS_ROUNDS=25 STRESS_PARALLEL=4 npm run stress -- test/resilience
 *
 * Every argument goes to `vitest run`. STRESS_ROUNDS (10) rounds of STRESS_PARALLEL (4) runs; the
 * output of each failed run is kept in a temporary folder, named at the end. Exits 1 if any failed.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A positive whole number from the environment, or the default; anything else stops the script. */
function count(name, fallback) {
  const value = Number(process.env[name] ?? fallback);
  if (Number.isInteger(value) && value > 0) return value;
  console.error(`${name} must be a positive whole number, not ${process.env[name]}`);
  process.exit(2);
}

const rounds = count("STRESS_ROUNDS", 10);
const parallel = count("STRESS_PARALLEL", 4);
const vitestArgs = process.argv.slice(2);
let kept;

/** One `vitest run`; resolves with whether it passed, keeping its output when it did not. */
function runOnce(name) {
  return new Promise((resolve) => {
    const child = spawn("npx", ["vitest", "run", ...vitestArgs], { stdio: ["ignore", "pipe", "pipe"] });
    const output = [];
    child.stdout.on("data", (chunk) => output.push(chunk));
    child.stderr.on("data", (chunk) => output.push(chunk));
    child.on("close", (code) => {
      if (code !== 0) {
        kept ??= mkdtempSync(join(tmpdir(), "cumulo-stress-"));
        writeFileSync(join(kept, `${name}.log`), Buffer.concat(output));
      }
      resolve(code === 0);
    });
  });
}

let failed = 0;
for (let round = 1; round <= rounds; round++) {
  const outcomes = await Promise.all(
    Array.from({ length: parallel }, (_, run) => runOnce(`round-${round}-run-${run + 1}`)),
  );
  const failedNow = outcomes.filter((passed) => !passed).length;
  failed += failedNow;
  console.log(`round ${round}/${rounds}: ${parallel - failedNow} passed, ${failedNow} failed`);
}
console.log(
  failed === 0
    ? `all ${rounds * parallel} runs passed`
    : `${failed} of ${rounds * parallel} runs failed; their output is in ${kept}`,
);
process.exitCode = failed === 0 ? 0 : 1;
