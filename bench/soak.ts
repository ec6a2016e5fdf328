import { readFileSync } from "node:fs";
import autocannon from "autocannon";
import { exitOf, serve } from "../test/support/process.ts";
import { createTestStore } from "../test/support/store.ts";

/**
 * Minutes of mixed reads and writes against a real server process, sampling its resident memory.
 * Prints the samples and the growth rate after warm-up; it measures, it does not assert.
 */

const MINUTES = Number(process.env.SOAK_MINUTES ?? 3);
const WARMUP_S = Number(process.env.SOAK_WARMUP_S ?? 30);
const SAMPLE_S = 5;
const KEY = "soak_admin_key_0123456789abcdef";

const rssMiB = (pid: number) => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
};

/** Least-squares slope of y over x. */
function slope(points: [number, number][]): number {
  const n = points.length;
  const meanX = points.reduce((sum, [x]) => sum + x, 0) / n;
  const meanY = points.reduce((sum, [, y]) => sum + y, 0) / n;
  const numerator = points.reduce((sum, [x, y]) => sum + (x - meanX) * (y - meanY), 0);
  const denominator = points.reduce((sum, [x]) => sum + (x - meanX) ** 2, 0);
  return denominator === 0 ? 0 : numerator / denominator;
}

async function main() {
  const store = await createTestStore(process.env.TEST_DATABASE_URL ? "postgres" : "sqlite");
  const server = await serve({
    CUMULO_DATA_DIR: store.dataDir,
    DATABASE_URL: store.databaseUrl,
    CUMULO_BOOTSTRAP_API_KEY: KEY,
    CUMULO_RATE_LIMIT: "1000000000/1h",
    CUMULO_LOG_LEVEL: "warn",
  });
  const pid = server.child.pid ?? 0;
  const media = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
  const created = await fetch(`${server.apiUrl}/v1/media/libraries`, {
    method: "POST",
    headers: media,
    body: JSON.stringify({ name: "soak" }),
  });
  const library = ((await created.json()) as { data: { id: string } }).data;

  const samples: [number, number][] = [];
  const started = Date.now();
  const sampler = setInterval(
    () => samples.push([(Date.now() - started) / 1000, rssMiB(pid)]),
    SAMPLE_S * 1000,
  );
  const result = await autocannon({
    url: server.apiUrl,
    connections: 8,
    duration: MINUTES * 60,
    requests: [
      { method: "GET", path: "/v1/media/libraries?limit=20", headers: media },
      {
        method: "POST",
        path: "/v1/media/libraries",
        headers: media,
        body: JSON.stringify({ name: "soak write" }),
      },
      { method: "GET", path: `/v1/media/libraries/${library.id}/security`, headers: media },
      {
        method: "PUT",
        path: `/v1/media/libraries/${library.id}/security`,
        headers: media,
        body: JSON.stringify({ referrers: { action: "allow", values: ["example.com"] } }),
      },
      { method: "GET", path: "/v1/livestream/health", headers: media },
    ],
  });
  clearInterval(sampler);
  server.child.kill("SIGTERM");
  await exitOf(server.child);
  await store.drop();

  console.log(
    `soak: ${MINUTES} min, ${result.requests.total} requests, ${result.non2xx} non-2xx, ${result.errors} errors`,
  );
  console.log(`latency p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms`);
  console.log("t (s)  RSS (MiB)");
  for (const [t, rss] of samples) console.log(`${t.toFixed(0).padStart(5)}  ${rss.toFixed(1)}`);
  const steady = samples.filter(([t]) => t >= WARMUP_S);
  if (steady.length >= 2) {
    const perMinute = slope(steady) * 60;
    const first = steady[0]?.[1] ?? 0;
    console.log(
      `RSS after ${WARMUP_S} s warm-up: ${first.toFixed(1)} MiB -> ${steady.at(-1)?.[1].toFixed(1)} MiB, trend ${perMinute.toFixed(2)} MiB/min`,
    );
  }
}

await main();
