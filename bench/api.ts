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
 * Representative reads and writes of a running Cumulo, each printed beside a bare Fastify JSON route
 * measured in the same run (ratio = Cumulo req/s ÷ baseline req/s), on SQLite and on PostgreSQL.
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

async function scenarios(base: string): Promise<[string, Target][]> {
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
    ["read: library list", { url: `${base}/v1/media/libraries?limit=20`, headers: media }],
    ["read: load balancer get", { url: `${base}/v1/network/load_balancers/${lb.uuid}`, headers: cloud }],
    [
      "read: analytics (24 h, 1 h)",
      { url: `${base}/v1/cdn/analytics?granularity=1h`, headers: { "x-api-key": BENCH_KEY } },
    ],
    [
      "write: token create",
      {
        url: `${base}/v1/user-resource/token`,
        method: "POST",
        headers: form,
        body: new URLSearchParams({
          billing_account_id: String(billing.id),
          description: "bench",
          restricted: "false",
        }).toString(),
      },
    ],
    [
      "write: security update",
      {
        url: `${base}/v1/media/libraries/${library.id}/security`,
        method: "PUT",
        headers: media,
        body: JSON.stringify({
          referrers: { action: "allow", values: ["example.com", "*.example.org"] },
          countries: { action: "deny", values: ["FR"] },
        }),
      },
    ],
  ];
}

const widths = [15, 30, 10, 9, 9, 8, 8];
const row = (store: string, name: string, m: Measurement, baseline: Measurement) =>
  formatRow(
    [
      store,
      name,
      m.requestsPerSecond.toFixed(0),
      m.p50Ms.toFixed(1),
      m.p99Ms.toFixed(1),
      (m.requestsPerSecond / baseline.requestsPerSecond).toFixed(3),
      m.errors + m.non2xx,
    ],
    widths,
  );

async function main() {
  console.log(`autocannon: ${CONNECTIONS} connections, ${DURATION_S} s per scenario`);
  const baselineServer = await startBaseline();
  const baseline = await measure({ url: baselineServer.url });
  console.log(formatRow(["store", "scenario", "req/s", "p50 ms", "p99 ms", "ratio", "errors"], widths));
  console.log(row("-", "baseline: bare Fastify JSON", baseline, baseline));
  for (const { label, kind, env } of benchSetups()) {
    const running = await startBenchCumulo(kind, env);
    try {
      for (const [name, target] of await scenarios(running.cumulo.apiUrl ?? "")) {
        console.log(row(label, name, await measure(target), baseline));
      }
    } finally {
      await running.close();
    }
  }
  await baselineServer.close();
}

await main();
