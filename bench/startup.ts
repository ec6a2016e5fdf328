import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { median } from "./figures.ts";

/**
 * How long `cumulo serve` takes to start, as a developer's CI job or a restarted node waits for it:
 * from spawning the process to its "listening" line, and to the first answer of an authenticated
 * API read (which pays for whatever the server left to its first request). The baseline, run in the
 * same rounds: a Node process that loads Fastify and listens with one route (the ceiling for any
 * Fastify server's start).
 *
 *   npx tsx bench/startup.ts
 *   BENCH_BEFORE=/path/to/older/tree npx tsx bench/startup.ts   (that tree's `bin/cumulo.js` too)
 *
 * Each tree runs its own bundle (`node scripts/build-server.mjs` in it first). BENCH_ROUNDS (7)
 * rounds alternate the baseline and each tree, each on a data dir that was started once before
 * (migrations run, the key made) and, with the first start of each round, on an empty one. Medians
 * and the ratios to the baseline are printed last.
 */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const KEY = "bench_startup_key_0123456789abcdef";

const bareServer = `
import Fastify from "fastify";
const app = Fastify();
app.get("/v1/media/libraries", async () => ({ data: [], meta: {} }));
await app.listen({ port: 0, host: "127.0.0.1" });
console.log("listening on http://127.0.0.1:" + app.server.address().port);
`;

interface Start {
  /** ms from spawn to the "listening" line. */
  listening: number;
  /** ms from spawn to the first answered read. */
  firstAnswer: number;
}

/** Spawns `args`, times its "listening" line and its first answer to GET /v1/media/libraries, then stops it. */
function timeStart(args: string[], env: Record<string, string>, cwd: string): Promise<Start> {
  const started = performance.now();
  const child = spawn(process.execPath, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
    // A start that never answers ends the bench with its output rather than hanging it.
    timeout: 60_000,
    killSignal: "SIGKILL",
  });
  return new Promise<Start>((done, fail) => {
    let output = "";
    const onData = async (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/[^\s)]+)/.exec(output);
      if (!match?.[1]) return;
      child.stdout?.off("data", onData);
      child.stdout?.resume();
      const listening = performance.now() - started;
      try {
        const response = await fetch(`${match[1]}/v1/media/libraries`, {
          headers: { authorization: `Bearer ${KEY}` },
        });
        if (!response.ok) throw new Error(`first read answered ${response.status}`);
        await response.arrayBuffer();
        done({ listening, firstAnswer: performance.now() - started });
      } catch (error) {
        fail(error);
      } finally {
        child.kill("SIGTERM");
      }
    };
    child.stdout?.on("data", onData);
    child.on("exit", (code) =>
      fail(new Error(`${args.join(" ")} exited (${code}) before answering:\n${output}`)),
    );
  }).finally(
    () => new Promise((stopped) => (child.exitCode === null ? child.once("exit", stopped) : stopped(null))),
  );
}

const scratch = mkdtempSync(join(tmpdir(), "cumulo-startup-"));

const trees = [
  { name: "cumulo", root: process.cwd() },
  ...(process.env.BENCH_BEFORE ? [{ name: "before", root: resolve(process.env.BENCH_BEFORE) }] : []),
];
const serveEnv = (dataDir: string) => ({
  PORT: "0",
  CUMULO_EDGE_PORT: "off",
  CUMULO_LOG_LEVEL: "warn",
  CUMULO_DATA_DIR: dataDir,
  CUMULO_BOOTSTRAP_API_KEY: KEY,
});
const results = new Map<string, Start[]>();
const add = (name: string, start: Start) => results.set(name, [...(results.get(name) ?? []), start]);

try {
  for (let round = 0; round < ROUNDS; round++) {
    add("bare Fastify", await timeStart(["--input-type=module", "-e", bareServer], {}, process.cwd()));
    for (const tree of trees) {
      const dataDir = join(scratch, `${tree.name}-${round}`);
      const bin = join(tree.root, "bin", "cumulo.js");
      add(`${tree.name}, empty data dir`, await timeStart([bin, "serve"], serveEnv(dataDir), tree.root));
      add(`${tree.name}, restart`, await timeStart([bin, "serve"], serveEnv(dataDir), tree.root));
    }
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

const medians = new Map(
  [...results].map(([name, starts]) => [
    name,
    {
      listening: median(starts.map((s) => s.listening)),
      firstAnswer: median(starts.map((s) => s.firstAnswer)),
    },
  ]),
);
const bare = medians.get("bare Fastify") as Start;
console.log(`start-up, median of ${ROUNDS} rounds (ms from spawn)`);
console.log(`${"process".padEnd(28)} ${"listening".padStart(10)} ${"first answer".padStart(13)}`);
for (const [name, figures] of medians) {
  console.log(
    `${name.padEnd(28)} ${figures.listening.toFixed(0).padStart(10)} ${figures.firstAnswer.toFixed(0).padStart(13)}`,
  );
}
console.log("\nratios (time to the first answer, to bare Fastify's):");
for (const [name, figures] of medians) {
  if (name !== "bare Fastify")
    console.log(`${name}: ${(figures.firstAnswer / bare.firstAnswer).toFixed(2)}x`);
}
