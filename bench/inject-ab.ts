import { resolve } from "node:path";
import type { FastifyInstance, InjectOptions } from "fastify";
import pg from "pg";
import { cpuByProcess, median } from "./figures.ts";

/**
 * CPU time per request of the API's own code, before and after a change, in one process:
 *   BENCH_BEFORE=/path/to/extracted/older/tree npx tsx bench/inject-ab.ts
 * Each tree starts its own Cumulo (SQLite, or with AB_STORE=postgres and TEST_DATABASE_URL set a
 * PostgreSQL database of its own; its own bench/support.ts) and serves the same scenarios
 * through `app.inject` (no sockets: the HTTP stack, the same for both, is left out). The two builds
 * take turns in blocks of AB_REQUESTS (1000) requests, AB_ROUNDS (5) times, so both see the same
 * machine load; the process's user + system CPU per request is printed as median (min-max) per
 * build and the after/before ratio last. AB_SCENARIOS picks scenarios (comma-separated). On
 * PostgreSQL the CPU of the build's own database backends (from /proc, 10 ms ticks) is printed too:
 * PostgreSQL runs on the same cores.
 */

const KEY = "bench_admin_key_0123456789abcdef";
const REQUESTS = Number(process.env.AB_REQUESTS ?? 1000);
const ROUNDS = Number(process.env.AB_ROUNDS ?? 5);
const STORE = process.env.AB_STORE === "postgres" ? "postgres" : "sqlite";
const media = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
const cloud = { apikey: KEY };
const form = { ...cloud, "content-type": "application/x-www-form-urlencoded" };

interface Build {
  app: FastifyInstance;
  /** PostgreSQL: the build's database, whose backends' CPU is counted. */
  databaseName?: string;
  requests: Record<string, InjectOptions>;
  close(): Promise<void>;
}

async function start(tree: string): Promise<Build> {
  const support = await import(resolve(tree, "bench/support.ts"));
  const running = await support.startBenchCumulo(STORE);
  const app: FastifyInstance = running.cumulo.app;
  const call = async (method: InjectOptions["method"], url: string, headers: object, payload?: string) => {
    const response = await app.inject({ method, url, headers: headers as InjectOptions["headers"], payload });
    if (response.statusCode >= 300) throw new Error(`${tree}: ${method} ${url} ${response.statusCode}`);
    return response.json();
  };
  const library = (await call("POST", "/v1/media/libraries", media, JSON.stringify({ name: "bench" }))).data;
  for (let i = 0; i < 30; i++) {
    await call("POST", "/v1/media/libraries", media, JSON.stringify({ name: `filler ${i}` }));
  }
  const billing = (await call("GET", "/v1/payment/billing_account/list", cloud))[0];
  const vm = await call("POST", "/v1/user-resource/vm", form, "name=bench-vm");
  const lb = await call(
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
  return {
    app,
    databaseName: running.store.databaseUrl
      ? new URL(running.store.databaseUrl).pathname.slice(1)
      : undefined,
    close: () => running.close(),
    requests: {
      "library-list": { method: "GET", url: "/v1/media/libraries?limit=20", headers: media },
      "lb-get": { method: "GET", url: `/v1/network/load_balancers/${lb.uuid}`, headers: cloud },
      analytics: { method: "GET", url: "/v1/cdn/analytics?granularity=1h", headers: { "x-api-key": KEY } },
      "token-create": {
        method: "POST",
        url: "/v1/user-resource/token",
        headers: form,
        payload: `billing_account_id=${billing.id}&description=bench&restricted=false`,
      },
      "security-put": {
        method: "PUT",
        url: `/v1/media/libraries/${library.id}/security`,
        headers: media,
        payload: JSON.stringify({
          referrers: { action: "allow", values: ["example.com", "*.example.org"] },
          countries: { action: "deny", values: ["FR"] },
        }),
      },
    },
  };
}

let admin: pg.Client | undefined;

/** User + system CPU µs so far of each PostgreSQL backend serving `databaseName`, by pid. */
async function backendCpu(databaseName: string): Promise<Map<number, number>> {
  if (!admin) {
    admin = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await admin.connect();
  }
  const { rows } = await admin.query<{ pid: number }>("select pid from pg_stat_activity where datname = $1", [
    databaseName,
  ]);
  return cpuByProcess(rows.map((row) => row.pid));
}

/** CPU µs per request over `count` requests of one scenario, one at a time: this process's, and PostgreSQL's. */
async function block(
  build: Build,
  scenario: string,
  count: number,
): Promise<{ node: number; database: number }> {
  const request = build.requests[scenario];
  if (!request) throw new Error(`unknown scenario ${scenario}`);
  const backendsBefore = build.databaseName
    ? await backendCpu(build.databaseName)
    : new Map<number, number>();
  const before = process.cpuUsage();
  for (let i = 0; i < count; i++) {
    const response = await build.app.inject(request);
    if (response.statusCode >= 300) throw new Error(`${scenario}: ${response.statusCode} ${response.body}`);
  }
  const used = process.cpuUsage(before);
  const backendsAfter = build.databaseName ? await backendCpu(build.databaseName) : new Map<number, number>();
  let database = 0;
  for (const [pid, micros] of backendsAfter) database += micros - (backendsBefore.get(pid) ?? 0);
  return { node: (used.user + used.system) / count, database: database / count };
}

const spread = (values: number[]) =>
  `${median(values).toFixed(0)} µs (${Math.min(...values).toFixed(0)}-${Math.max(...values).toFixed(0)})`;

async function main() {
  const beforeTree = process.env.BENCH_BEFORE;
  if (!beforeTree) throw new Error("BENCH_BEFORE must name an extracted copy of the older tree");
  const builds = { before: await start(beforeTree), after: await start(resolve(import.meta.dirname, "..")) };
  const scenarios = (
    process.env.AB_SCENARIOS ?? "library-list,lb-get,analytics,token-create,security-put"
  ).split(",");
  const figures = new Map<string, { before: number[]; after: number[] }>();
  const databaseFigures = new Map<string, { before: number[]; after: number[] }>();
  for (const scenario of scenarios) {
    figures.set(scenario, { before: [], after: [] });
    databaseFigures.set(scenario, { before: [], after: [] });
    for (const build of Object.values(builds)) await block(build, scenario, 300);
  }
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate which build goes first, so neither always follows the other's garbage.
    const order = round % 2 === 0 ? (["before", "after"] as const) : (["after", "before"] as const);
    for (const scenario of scenarios) {
      for (const name of order) {
        const { node, database } = await block(builds[name], scenario, REQUESTS);
        figures.get(scenario)?.[name].push(node);
        databaseFigures.get(scenario)?.[name].push(database);
      }
    }
  }
  await builds.before.close();
  await builds.after.close();
  await admin?.end();
  const print = (title: string, table: Map<string, { before: number[]; after: number[] }>) => {
    console.log(`${title}, ${ROUNDS} alternated blocks of ${REQUESTS}:`);
    for (const [scenario, { before, after }] of table) {
      console.log(
        `${scenario.padEnd(14)} before ${spread(before)}  after ${spread(after)}  after/before ${(median(after) / median(before)).toFixed(2)}`,
      );
    }
  };
  print("CPU per request through app.inject", figures);
  if (STORE === "postgres") print("PostgreSQL backends' CPU per request", databaseFigures);
}

await main();
