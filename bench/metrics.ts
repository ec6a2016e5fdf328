/**
 * What recording metrics costs on the hot paths, against a baseline run in this same script: the
 * same loop calling a function that does nothing. Also times a scrape of a registry holding as many
 * API series as a busy node has, and a Fastify JSON route with and without the request hook, under
 * autocannon. `npx tsx bench/metrics.ts` (METRICS_BENCH_CALLS, default 2,000,000; BENCH_DURATION s).
 */
import Fastify from "fastify";
import { Metrics } from "../src/ops/metrics.ts";
import { median } from "./figures.ts";
import { DURATION_S, measure } from "./support.ts";

const CALLS = Number(process.env.METRICS_BENCH_CALLS ?? 2_000_000);
const ROUTES = Array.from({ length: 40 }, (_, index) => `/v1/media/libraries/:libraryId/resource${index}`);
const STATUSES = [200, 201, 404, 400, 429];

/** Nanoseconds per call of `body(i)` over CALLS iterations (best of three runs). */
function nsPerCall(body: (i: number) => void): number {
  let best = Number.POSITIVE_INFINITY;
  for (let run = 0; run < 3; run++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < CALLS; i++) body(i);
    best = Math.min(best, Number(process.hrtime.bigint() - started) / CALLS);
  }
  return best;
}

const metrics = new Metrics({ processMetrics: true });
let sink = 0;
const nothing = (_a: unknown, _b: unknown, _c: unknown, d: number) => {
  sink += d;
};

const cases: [string, (i: number) => void, (i: number) => void][] = [
  [
    "API answer (httpResponse)",
    (i) => metrics.httpResponse(ROUTES[i % 40], "GET", STATUSES[i % 5] ?? 200, 1.5),
    (i) => nothing(ROUTES[i % 40], "GET", STATUSES[i % 5], 1.5),
  ],
  [
    "edge cache hit (edgeResponse)",
    () => metrics.edgeResponse("HIT", 1024, undefined),
    () => nothing("HIT", 1024, 0, 0),
  ],
  [
    "edge miss (edgeResponse)",
    () => metrics.edgeResponse("MISS", 1024, 3),
    () => nothing("MISS", 1024, 0, 3),
  ],
  [
    "store query (storeQuery)",
    (i) => metrics.storeQuery(0.2, i % 1000 === 0),
    (i) => nothing(0.2, i, 0, 0.2),
  ],
];

console.log(`metrics recording, ${CALLS} calls each (best of 3)`);
console.log("case                          baseline ns  metrics ns  added ns  ratio");
for (const [name, measured, baseline] of cases) {
  const base = nsPerCall(baseline);
  const withMetrics = nsPerCall(measured);
  console.log(
    `${name.padEnd(30)}${base.toFixed(1).padStart(11)}${withMetrics.toFixed(1).padStart(12)}` +
      `${(withMetrics - base).toFixed(1).padStart(10)}${(withMetrics / base).toFixed(1).padStart(7)}`,
  );
}

// A scrape: every route x status series present (40 x 5), plus process metrics.
const scrapes = 20;
const started = process.hrtime.bigint();
let bytes = 0;
for (let i = 0; i < scrapes; i++) bytes = (await metrics.render()).body.length;
const scrapeMs = Number(process.hrtime.bigint() - started) / 1e6 / scrapes;
console.log(
  `scrape of ${ROUTES.length * STATUSES.length} API series: ${scrapeMs.toFixed(2)} ms, ${bytes} bytes`,
);

/** A bare JSON route, with Cumulo's request hook when `metered`; its throughput under autocannon. */
async function routeThroughput(metered: boolean) {
  const app = Fastify({ logger: false });
  if (metered) {
    app.addHook("onResponse", (request, reply, done) => {
      metrics.httpResponse(request.routeOptions.url, request.method, reply.statusCode, reply.elapsedTime);
      done();
    });
  }
  app.get("/json", async () => ({ success: true, message: "ok", data: { id: "b1b0c2f4" } }));
  await app.listen({ port: 0, host: "127.0.0.1" });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  try {
    return await measure({ url: `http://127.0.0.1:${port}/json` });
  } finally {
    await app.close();
  }
}

// Alternating rounds after a warm-up, medians compared: the machine's noise hits both alike.
await routeThroughput(false);
const bareRuns: number[] = [];
const meteredRuns: number[] = [];
for (let round = 0; round < 3; round++) {
  bareRuns.push((await routeThroughput(false)).requestsPerSecond);
  meteredRuns.push((await routeThroughput(true)).requestsPerSecond);
}
console.log(
  `bare Fastify JSON route, 3 alternating rounds of ${DURATION_S} s, median: ${median(bareRuns).toFixed(0)} req/s` +
    ` without the request hook, ${median(meteredRuns).toFixed(0)} with it` +
    ` (ratio ${(median(meteredRuns) / median(bareRuns)).toFixed(3)})`,
);
if (sink === -1) console.log(sink);
