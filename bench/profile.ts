import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { BIN } from "../test/support/cli.ts";
import { exitOf } from "../test/support/process.ts";
import { createTestStore } from "../test/support/store.ts";
import { processCpuMicros } from "./figures.ts";

/**
 * CPU profile of a real `cumulo serve` process (`node --cpu-prof`) under one autocannon load, then the
 * hottest frames by self time and the hottest files, counting only the samples taken under the load.
 * Usage:
 *   npx tsx bench/profile.ts [library-list|security-put|lb-get|analytics|token-create]
 * PROFILE_SECONDS (10) sets the load duration; PROFILE_DISTINCT_READS asks that many different
 * library searches first; TEST_DATABASE_URL profiles on PostgreSQL; REDIS_URL is passed on to the
 * server. It also prints the server's CPU time per request (user + system, from
 * /proc), which a busy shared machine disturbs far less than requests per second. PROFILE_OFF=1 runs
 * without the profiler (for that figure alone). The figure is also given without the CPU the process
 * spends while idle (measured for 3 s before the load).
 * V8's sampler over-counts calls into native code: `PRAGMA data_version` and the key's random bytes
 * took 7-11% and 4-7% of the samples for calls of 2-3 µs (docs/performance.md, session 36). For the
 * true split, run with PROFILE_OFF=1 and NODE_OPTIONS=--perf-basic-prof while Linux's perf records
 * (`perf record -F 999 -a -g -e cpu-clock -- sleep 6`), then `perf report --children --pid <server>`.
 */

const KEY = "profile_admin_key_0123456789abcdef";
const SECONDS = Number(process.env.PROFILE_SECONDS ?? 10);
const IDLE_SECONDS = 3;
const scenario = process.argv[2] ?? "library-list";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  startTime: number;
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** User + system CPU time of a process so far, in ms (clock ticks of 10 ms on Linux). */
const cpuMs = (pid: number): number => processCpuMicros(pid) / 1000;

async function main() {
  const store = await createTestStore(process.env.TEST_DATABASE_URL ? "postgres" : "sqlite");
  const profileDir = mkdtempSync(join(tmpdir(), "cumulo-profile-"));
  const profiling = process.env.PROFILE_OFF !== "1";
  const flags = profiling ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] : [];
  const child = spawn(process.execPath, [...flags, BIN, "serve"], {
    env: {
      ...process.env,
      PORT: "0",
      CUMULO_EDGE_PORT: "off",
      CUMULO_LOG_LEVEL: process.env.PROFILE_LOG_LEVEL ?? "warn",
      CUMULO_DATA_DIR: store.dataDir,
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
      CUMULO_BOOTSTRAP_API_KEY: KEY,
      CUMULO_RATE_LIMIT: "1000000000/1h",
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const base = await new Promise<string>((resolve, reject) => {
    let output = "";
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match?.[1]) {
        // From here on the server's log lines are drained without being kept or searched.
        child.stdout?.off("data", onData);
        child.stdout?.resume();
        resolve(match[1]);
      }
    };
    child.stdout?.on("data", onData);
    child.on("exit", () => reject(new Error(`server exited:\n${output}`)));
  });
  const media = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
  const post = async (path: string, body: unknown, headers: Record<string, string> = media) => {
    const response = await fetch(base + path, {
      method: "POST",
      headers,
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return response.json() as Promise<Record<string, unknown>>;
  };
  const library = (await post("/v1/media/libraries", { name: "profile" })).data as { id: string };
  for (let i = 0; i < 30; i++) await post("/v1/media/libraries", { name: `filler ${i}` });

  const cloud = { apikey: KEY };
  const form = { ...cloud, "content-type": "application/x-www-form-urlencoded" };
  let target: autocannon.Options;
  switch (scenario) {
    case "security-put":
      target = {
        url: `${base}/v1/media/libraries/${library.id}/security`,
        method: "PUT",
        headers: media,
        body: JSON.stringify({ referrers: { action: "allow", values: ["example.com"] } }),
      };
      break;
    case "lb-get": {
      const vm = await post("/v1/user-resource/vm", "name=profile-vm", form);
      const billing = (await (
        await fetch(`${base}/v1/payment/billing_account/list`, { headers: cloud })
      ).json()) as { id: number }[];
      const lb = await post(
        "/v1/network/load_balancers",
        {
          display_name: "profile",
          billing_account_id: billing[0]?.id,
          forwarding_rules: [{ source_port: 80, target_port: 8080 }],
          targets: [{ target_uuid: vm.uuid, target_type: "vm" }],
        },
        { ...cloud, "content-type": "application/json" },
      );
      target = { url: `${base}/v1/network/load_balancers/${lb.uuid}`, headers: cloud };
      break;
    }
    case "analytics":
      target = { url: `${base}/v1/cdn/analytics?granularity=1h`, headers: { "x-api-key": KEY } };
      break;
    case "token-create":
      target = {
        url: `${base}/v1/user-resource/token`,
        method: "POST",
        headers: form,
        body: "description=profile&restricted=false",
      };
      break;
    default:
      target = { url: `${base}/v1/media/libraries?limit=20`, headers: media };
  }
  // A server that has answered many different reads keeps each one's rows (SQLite's read cache) until
  // the next write: PROFILE_DISTINCT_READS first asks that many different library searches.
  const distinctReads = Number(process.env.PROFILE_DISTINCT_READS ?? 0);
  if (distinctReads > 0) {
    await autocannon({
      url: `${base}/v1/media/libraries?limit=20&search=warm-[<id>]`,
      headers: media,
      connections: 10,
      amount: distinctReads,
      idReplacement: true,
    });
  }
  // The server's own background work (job and webhook polling) while idle, taken out of the figure:
  // on a loaded machine few requests get through and would otherwise carry all of it.
  const idleStart = cpuMs(child.pid ?? 0);
  await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000));
  const idleMsPerSecond = (cpuMs(child.pid ?? 0) - idleStart) / IDLE_SECONDS;
  const cpuBefore = cpuMs(child.pid ?? 0);
  const started = performance.now();
  // The profile's clock is the system's monotonic clock in µs, as `process.hrtime` is.
  const loadFrom = Number(process.hrtime.bigint() / 1000n);
  const result = await autocannon({ ...target, connections: 10, duration: SECONDS });
  const loadTo = Number(process.hrtime.bigint() / 1000n);
  const busyMs = cpuMs(child.pid ?? 0) - cpuBefore;
  const loadSeconds = (performance.now() - started) / 1000;
  const cpuPerRequest = (busyMs * 1000) / result.requests.total;
  const netPerRequest = ((busyMs - idleMsPerSecond * loadSeconds) * 1000) / result.requests.total;
  console.log(
    `${scenario}: ${result.requests.average} req/s, p99 ${result.latency.p99} ms, non-2xx ${result.non2xx}, server CPU ${cpuPerRequest.toFixed(0)} µs/request (${netPerRequest.toFixed(0)} without the idle ${idleMsPerSecond.toFixed(0)} ms/s)`,
  );
  child.kill("SIGTERM");
  await exitOf(child);
  await store.drop();
  if (!profiling) return;

  // CPU.<date>.<time>.<pid>.<thread>.<sequence>.cpuprofile: thread 0 serves; tsx's loader has its own.
  const file = readdirSync(profileDir).find((name) => /\.0\.\d+\.cpuprofile$/.test(name));
  if (!file) throw new Error("no profile written");
  const profile = JSON.parse(readFileSync(join(profileDir, file), "utf8")) as Profile;
  // Only the samples taken under load: start-up and set-up would otherwise dominate a short run.
  const selfTime = new Map<number, number>();
  let sampledAt = profile.startTime;
  profile.samples.forEach((id, index) => {
    const delta = profile.timeDeltas[index] ?? 0;
    sampledAt += delta;
    if (sampledAt < loadFrom || sampledAt > loadTo) return;
    selfTime.set(id, (selfTime.get(id) ?? 0) + delta);
  });
  const total = [...selfTime.values()].reduce((sum, value) => sum + value, 0);
  const byFrame = new Map<string, number>();
  const byFile = new Map<string, number>();
  for (const node of profile.nodes) {
    const time = selfTime.get(node.id) ?? 0;
    const { functionName, url, lineNumber } = node.callFrame;
    const short = url.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*\/src\//, "src/");
    const frame = `${functionName || "(anonymous)"} ${short}:${lineNumber + 1}`;
    byFrame.set(frame, (byFrame.get(frame) ?? 0) + time);
    const group = short.startsWith("src/")
      ? short
      : short
          .split("/")
          .slice(0, short.startsWith("@") ? 2 : 1)
          .join("/");
    byFile.set(group || "(native)", (byFile.get(group || "(native)") ?? 0) + time);
  }
  const top = (map: Map<string, number>, n: number) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, time]) => `${((100 * time) / total).toFixed(1).padStart(5)}%  ${name}`)
      .join("\n");
  console.log(`profile: ${join(profileDir, file)}\n\nself time by frame:\n${top(byFrame, 30)}`);
  console.log(`\nself time by package / source file:\n${top(byFile, 20)}`);
}

await main();
