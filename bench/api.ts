import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Fastify from "fastify";
import { exitOf } from "../test/support/process.ts";
import { median } from "./figures.ts";
import {
  BENCH_KEY,
  benchSetups,
  CONNECTIONS,
  DURATION_S,
  formatRow,
  type Measurement,
  measure,
  startBaseline,
  startBenchCumulo,
  type Target,
} from "./support.ts";

/**
 * Representative reads and writes of a running Cumulo, each measured beside (in the same run, one
 * right after the other):
 * - a bare Fastify route at the same method and path that answers the same JSON Cumulo answered
 *   (no store, no hooks, Fastify's default serializer): `ratio` = Cumulo req/s ÷ its req/s;
 * - with BENCH_PRISM=1, Prism (`@stoplight/prism-cli`) mocking Cumulo's own openapi.json:
 *   `×prism` = Cumulo req/s ÷ Prism req/s.
 * On SQLite, PostgreSQL, and PostgreSQL with Redis (see `benchSetups`).
 *
 * Each scenario runs BENCH_ROUNDS (3) alternated pairs, bare route then Cumulo; `ratio` is the median
 * of the pairs' ratios, with their range, since on a shared machine one pair's ratio moves by half
 * from one minute to the next. `cpu` is the same comparison in server CPU per request (the threads of
 * this process other than autocannon's, from Linux's /proc): bare route's µs ÷ Cumulo's.
 */

const media = { authorization: `Bearer ${BENCH_KEY}`, "content-type": "application/json" };
const cloud = { apikey: BENCH_KEY };

async function call(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
) {
  const response = await fetch(base + path, { method, headers, body });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} -> ${response.status}: ${text}`);
  return JSON.parse(text);
}

interface Scenario {
  name: string;
  path: string;
  target: Omit<Target, "url">;
}

async function scenarios(base: string): Promise<Scenario[]> {
  const library = (
    await call(base, "POST", "/v1/media/libraries", media, JSON.stringify({ name: "bench library" }))
  ).data;
  for (let i = 0; i < 30; i++) {
    await call(base, "POST", "/v1/media/libraries", media, JSON.stringify({ name: `filler ${i}` }));
  }
  const billing = (await call(base, "GET", "/v1/payment/billing_account/list", cloud))[0];
  const form = { ...cloud, "content-type": "application/x-www-form-urlencoded" };
  const vm = await call(
    base,
    "POST",
    "/v1/user-resource/vm",
    form,
    new URLSearchParams({ name: "bench-vm" }).toString(),
  );
  const lb = await call(
    base,
    "POST",
    "/v1/network/load_balancers",
    { ...cloud, "content-type": "application/json" },
    JSON.stringify({
      display_name: "bench-lb",
      billing_account_id: billing.id,
      forwarding_rules: [{ protocol: "TCP", source_port: 80, target_port: 8080 }],
      targets: [{ target_uuid: vm.uuid, target_type: "vm" }],
    }),
  );
  return [
    // `page` is given because Prism reads the published schema's defaulted `page` as required.
    { name: "read: library list", path: "/v1/media/libraries?limit=20&page=1", target: { headers: media } },
    {
      name: "read: load balancer get",
      path: `/v1/network/load_balancers/${lb.uuid}`,
      target: { headers: cloud },
    },
    {
      name: "read: analytics (24 h, 1 h)",
      path: "/v1/cdn/analytics?granularity=1h",
      target: { headers: { "x-api-key": BENCH_KEY } },
    },
    {
      name: "write: token create",
      path: "/v1/user-resource/token",
      target: {
        method: "POST",
        headers: form,
        body: new URLSearchParams({
          billing_account_id: String(billing.id),
          description: "bench",
          restricted: "false",
        }).toString(),
      },
    },
    {
      name: "write: security update",
      path: `/v1/media/libraries/${library.id}/security`,
      target: {
        method: "PUT",
        headers: media,
        body: JSON.stringify({
          referrers: { action: "allow", values: ["example.com", "*.example.org"] },
          countries: { action: "deny", values: ["FR"] },
        }),
      },
    },
  ];
}

/**
 * A bare Fastify server answering each scenario's method and path with the JSON (and status) Cumulo
 * gave for it once: the ceiling of the same answer without the store, hooks and schemas.
 */
async function startSameAnswers(base: string, list: Scenario[]) {
  const app = Fastify({ logger: false });
  // Fastify parses JSON itself; form bodies get the smallest parser that reads them.
  app.addContentTypeParser("application/x-www-form-urlencoded", { parseAs: "string" }, (_r, body, done) =>
    done(null, Object.fromEntries(new URLSearchParams(body as string))),
  );
  for (const { path, target } of list) {
    const response = await fetch(base + path, {
      method: target.method ?? "GET",
      headers: target.headers,
      body: target.body,
    });
    const status = response.status;
    const answer = await response.json();
    app.route({
      method: target.method ?? "GET",
      url: path.split("?")[0] ?? path,
      handler: async (_request, reply) => reply.code(status).send(answer),
    });
  }
  await app.listen({ port: 0, host: "127.0.0.1" });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
}

/** Prism mocking Cumulo's published openapi.json, as its own process. */
async function startPrism(cumuloBase: string) {
  const dir = mkdtempSync(join(tmpdir(), "cumulo-prism-"));
  const spec = join(dir, "openapi.json");
  writeFileSync(spec, await (await fetch(`${cumuloBase}/openapi.json`)).text());
  const bin = createRequire(import.meta.url).resolve("@stoplight/prism-cli/dist/index.js");
  const child = spawn(process.execPath, [bin, "mock", "--host", "127.0.0.1", "--port", "0", spec], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Prism is listening on (http:\/\/\S+)/.exec(output);
      if (match?.[1]) {
        // From here on its per-request log lines are drained without being kept.
        child.stdout?.off("data", onData);
        child.stdout?.resume();
        resolve(match[1]);
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on("exit", (code) => reject(new Error(`prism exited with ${code}:\n${output}`)));
  });
  return {
    url,
    async close() {
      child.kill("SIGTERM");
      await exitOf(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `BENCH_SCENARIOS=analytics,token` runs only the scenarios whose names contain one of the words. */
const picked = (name: string): boolean => {
  const words = (process.env.BENCH_SCENARIOS ?? "").split(",").filter((word) => word !== "");
  return words.length === 0 || words.some((word) => name.includes(word));
};

/** Rounds of each pair of measurements (bare route, then Cumulo), alternated. */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));

const widths = [15, 30, 8, 8, 11, 7, 13, 9, 9, 7, 9, 8, 7];
const header = [
  "store",
  "scenario",
  "req/s",
  "p99 ms",
  "bare req/s",
  "ratio",
  "ratio range",
  "µs/req",
  "bare µs",
  "cpu",
  "prism r/s",
  "×prism",
  "errors",
];

/**
 * `ROUNDS` pairs of measurements of one scenario, the bare route then Cumulo in each, so that a change
 * of the machine's load between rounds falls on both sides; the ratio is the median of the pairs'.
 */
async function measurePairs(bareUrl: string, cumuloUrl: string, target: Scenario["target"]) {
  const pairs: { bare: Measurement; cumulo: Measurement; ratio: number }[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const bare = await measure({ ...target, url: bareUrl });
    const cumulo = await measure({ ...target, url: cumuloUrl });
    pairs.push({ bare, cumulo, ratio: cumulo.requestsPerSecond / bare.requestsPerSecond });
  }
  const ratios = pairs.map((pair) => pair.ratio);
  const cumuloCpu = median(pairs.map((pair) => pair.cumulo.serverCpuMicrosPerRequest));
  const bareCpu = median(pairs.map((pair) => pair.bare.serverCpuMicrosPerRequest));
  return {
    ratio: median(ratios),
    lowest: Math.min(...ratios),
    highest: Math.max(...ratios),
    cumuloRps: median(pairs.map((pair) => pair.cumulo.requestsPerSecond)),
    bareRps: median(pairs.map((pair) => pair.bare.requestsPerSecond)),
    cumuloP99: median(pairs.map((pair) => pair.cumulo.p99Ms)),
    cumuloCpu,
    bareCpu,
    // Server CPU per request, bare over Cumulo: the same kind of ratio, steadier on a busy machine.
    cpuRatio: bareCpu / cumuloCpu,
    errors: pairs.reduce((sum, pair) => sum + pair.cumulo.errors + pair.cumulo.non2xx, 0),
  };
}

async function main() {
  const withPrism = process.env.BENCH_PRISM === "1";
  console.log(
    `autocannon: ${CONNECTIONS} connections, ${DURATION_S} s per measurement, ${ROUNDS} alternated rounds per scenario`,
  );
  const tiny = await startBaseline();
  const tinyFigure = await measure({ url: tiny.url });
  await tiny.close();
  console.log(`bare Fastify, small JSON: ${tinyFigure.requestsPerSecond.toFixed(0)} req/s`);
  console.log(formatRow(header, widths));
  const results: string[] = [];
  for (const { label, kind, env } of benchSetups()) {
    const running = await startBenchCumulo(kind, env);
    const base = running.cumulo.apiUrl ?? "";
    const list = (await scenarios(base)).filter(({ name }) => picked(name));
    const same = await startSameAnswers(base, list);
    const prism = withPrism ? await startPrism(base) : undefined;
    try {
      for (const { name, path, target } of list) {
        const pairs = await measurePairs(same.url + path, base + path, target);
        const mocked = prism ? await measure({ ...target, url: prism.url + path }) : undefined;
        const overPrism = mocked ? pairs.cumuloRps / mocked.requestsPerSecond : undefined;
        console.log(
          formatRow(
            [
              label,
              name,
              pairs.cumuloRps.toFixed(0),
              pairs.cumuloP99.toFixed(1),
              pairs.bareRps.toFixed(0),
              pairs.ratio.toFixed(3),
              `${pairs.lowest.toFixed(2)}-${pairs.highest.toFixed(2)}`,
              pairs.cumuloCpu.toFixed(0),
              pairs.bareCpu.toFixed(0),
              pairs.cpuRatio.toFixed(3),
              mocked ? mocked.requestsPerSecond.toFixed(0) : "-",
              overPrism ? overPrism.toFixed(1) : "-",
              pairs.errors,
            ],
            widths,
          ),
        );
        results.push(
          `${label} ${name}: ${pairs.ratio.toFixed(3)} of bare Fastify (median of ${ROUNDS} rounds, ` +
            `${pairs.lowest.toFixed(3)}-${pairs.highest.toFixed(3)}); server CPU per request ` +
            `(bare route's ÷ Cumulo's) ${pairs.cpuRatio.toFixed(3)}` +
            (overPrism ? `, ${overPrism.toFixed(1)}× Prism (${mocked?.non2xx ?? 0} non-2xx from Prism)` : ""),
        );
      }
    } finally {
      await prism?.close();
      await same.close();
      await running.close();
    }
  }
  console.log(`\nratios:\n${results.join("\n")}`);
}

await main();
