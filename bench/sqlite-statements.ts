/**
 * The SQLite statements each request of a scenario runs, counted and timed inside better-sqlite3:
 * a deterministic complement to the req/s of `bench/api.ts`, which a busy machine disturbs.
 * `npx tsx bench/sqlite-statements.ts [library-list|lb-get|analytics|token-create|security-put]`;
 * BENCH_REQUESTS (2000) requests from BENCH_CONNECTIONS (10) concurrent loops over keep-alive
 * connections. Prints, per statement text, its runs per request and its µs per request.
 */
import SqliteDatabase from "better-sqlite3";
import { BENCH_KEY, startBenchCumulo } from "./support.ts";

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 2000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const scenario = process.argv[2] ?? "library-list";

type Statement = Record<"run" | "all" | "get" | "iterate", (...parameters: unknown[]) => unknown>;
const runs = new Map<string, { count: number; nanoseconds: bigint }>();

// Every statement the store prepares is wrapped, so its runs are counted and timed where they run.
const { prototype } = SqliteDatabase as unknown as { prototype: { prepare(text: string): Statement } };
const prepare = prototype.prepare;
prototype.prepare = function timedPrepare(text: string) {
  const statement = prepare.call(this, text);
  for (const method of ["run", "all", "get", "iterate"] as const) {
    const original = statement[method];
    statement[method] = function timed(...parameters: unknown[]) {
      const start = process.hrtime.bigint();
      try {
        return original.apply(this, parameters);
      } finally {
        const entry = runs.get(text) ?? { count: 0, nanoseconds: 0n };
        entry.count++;
        entry.nanoseconds += process.hrtime.bigint() - start;
        runs.set(text, entry);
      }
    };
  }
  return statement;
};

async function json(response: Response): Promise<unknown> {
  const text = await response.text();
  if (!response.ok) throw new Error(`${response.url} -> ${response.status}: ${text}`);
  return JSON.parse(text);
}

const { cumulo, close } = await startBenchCumulo("sqlite");
try {
  const base = cumulo.apiUrl ?? "";
  const media = { authorization: `Bearer ${BENCH_KEY}`, "content-type": "application/json" };
  const cloud = { apikey: BENCH_KEY };
  const library = (
    (await json(
      await fetch(`${base}/v1/media/libraries`, {
        method: "POST",
        headers: media,
        body: JSON.stringify({ name: "bench" }),
      }),
    )) as { data: { id: string } }
  ).data;
  const [billing] = (await json(
    await fetch(`${base}/v1/payment/billing_account/list`, { headers: cloud }),
  )) as { id: number }[];
  const form = { ...cloud, "content-type": "application/x-www-form-urlencoded" };
  const vm = (await json(
    await fetch(`${base}/v1/user-resource/vm`, { method: "POST", headers: form, body: "name=bench-vm" }),
  )) as { uuid: string };
  const lb = (await json(
    await fetch(`${base}/v1/network/load_balancers`, {
      method: "POST",
      headers: { ...cloud, "content-type": "application/json" },
      body: JSON.stringify({
        display_name: "bench-lb",
        billing_account_id: billing?.id,
        forwarding_rules: [{ protocol: "TCP", source_port: 80, target_port: 8080 }],
        targets: [{ target_uuid: vm.uuid, target_type: "vm" }],
      }),
    }),
  )) as { uuid: string };

  const requests: Record<string, () => Promise<Response>> = {
    "library-list": () => fetch(`${base}/v1/media/libraries?limit=20&page=1`, { headers: media }),
    "lb-get": () => fetch(`${base}/v1/network/load_balancers/${lb.uuid}`, { headers: cloud }),
    analytics: () =>
      fetch(`${base}/v1/cdn/analytics?granularity=1h`, { headers: { "x-api-key": BENCH_KEY } }),
    "token-create": () =>
      fetch(`${base}/v1/user-resource/token`, {
        method: "POST",
        headers: form,
        body: new URLSearchParams({
          billing_account_id: String(billing?.id),
          description: "bench",
        }).toString(),
      }),
    "security-put": () =>
      fetch(`${base}/v1/media/libraries/${library.id}/security`, {
        method: "PUT",
        headers: media,
        body: JSON.stringify({ referrers: { action: "allow", values: ["example.com"] } }),
      }),
  };
  const send = requests[scenario];
  if (!send) throw new Error(`unknown scenario ${scenario}: one of ${Object.keys(requests).join(", ")}`);
  await json(await send()); // the first answer may fill caches: not counted
  runs.clear();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      for (let i = 0; i < REQUESTS / CONNECTIONS; i++) await json(await send());
    }),
  );
  console.log(`# ${scenario}: SQLite statements per request (${REQUESTS} requests, ${CONNECTIONS} loops)`);
  console.log("| runs per request | µs per request | statement |");
  console.log("|---|---|---|");
  for (const [text, { count, nanoseconds }] of [...runs].sort((a, b) =>
    Number(b[1].nanoseconds - a[1].nanoseconds),
  )) {
    if (count / REQUESTS < 0.01) continue; // housekeeping and workers' polls
    const micros = Number(nanoseconds) / REQUESTS / 1000;
    console.log(
      `| ${(count / REQUESTS).toFixed(2)} | ${micros.toFixed(1)} | ${text.replace(/\s+/g, " ").slice(0, 120)} |`,
    );
  }
} finally {
  await close();
}
