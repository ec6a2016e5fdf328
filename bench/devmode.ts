import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import { StateRepository } from "../src/devmode/state-repository.ts";
import { median } from "./figures.ts";
import { BENCH_KEY, benchStores, formatRow, startBenchCumulo } from "./support.ts";

/**
 * Developer mode: how long the state calls a test suite makes between tests take (over HTTP, as a
 * suite calls them) on a store of a few thousand rows: save and load a snapshot, reset one
 * organization, reset the whole store. The baseline, measured in the same run on the same server, is
 * one ordinary authenticated API read (`GET /v1/media/libraries`); the ratios say how many such
 * reads each call costs.
 */
const ORGANIZATIONS = Number(process.env.BENCH_ORGANIZATIONS ?? 800);
const LIBRARIES = Number(process.env.BENCH_LIBRARIES ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const headers = { authorization: `Bearer ${BENCH_KEY}`, "content-type": "application/json" };

async function timed(url: string, method: string, body?: unknown): Promise<number> {
  const started = performance.now();
  const response = await fetch(url, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!response.ok) throw new Error(`${method} ${url} -> ${response.status}: ${await response.text()}`);
  await response.arrayBuffer();
  return performance.now() - started;
}

const summary = (values: number[]) => `${median(values).toFixed(1)} (max ${Math.max(...values).toFixed(1)})`;

const OPERATIONS = ["baseline GET", "save", "load", "reset one org", "reset all"] as const;
type Operation = (typeof OPERATIONS)[number];
const results: { kind: string; rows: number; times: Record<Operation, number[]> }[] = [];

for (const kind of benchStores()) {
  const bench = await startBenchCumulo(kind, { CUMULO_DEV_MODE: "true", CUMULO_ROLES: "api" });
  try {
    const { identity, media } = bench.cumulo.services;
    const organizations: string[] = [];
    for (let i = 0; i < ORGANIZATIONS; i++) {
      organizations.push((await identity.createOrganization(`bench ${i}`)).organization_id);
    }
    // Libraries (each with its distribution and provisioning job) for the first organizations.
    for (let i = 0; i < LIBRARIES; i++) {
      const organizationId = organizations[i % ROUNDS] as string;
      await media.libraries.create(organizationId, randomUUID(), { name: `library ${i}` });
    }
    const db = bench.cumulo.store.db;
    let rows = 0;
    for (const table of await new StateRepository(db, bench.store.kind).tables()) {
      const { rows: counted } = await sql<{ n: number }>`select count(*) as n from ${sql.id(table)}`.execute(
        db,
      );
      rows += Number(counted[0]?.n ?? 0);
    }
    const api = bench.cumulo.apiUrl ?? "";
    const snapshot = `${api}/_cumulo/state/snapshots/bench`;
    const times = Object.fromEntries(OPERATIONS.map((name) => [name, [] as number[]])) as Record<
      Operation,
      number[]
    >;
    await timed(`${api}/v1/media/libraries`, "GET"); // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      times["baseline GET"].push(await timed(`${api}/v1/media/libraries`, "GET"));
      times.save.push(await timed(snapshot, "PUT"));
      times.load.push(await timed(`${snapshot}/load`, "POST"));
      times["reset one org"].push(
        await timed(`${api}/_cumulo/state/reset`, "POST", { organization_id: organizations[round] }),
      );
      times["reset all"].push(await timed(`${api}/_cumulo/state/reset`, "POST", { to: "bootstrap" }));
      await timed(`${snapshot}/load`, "POST"); // the next round starts from the full store again
    }
    results.push({ kind, rows, times });
  } finally {
    await bench.close();
  }
}

const widths = [10, 7, ...OPERATIONS.map(() => 22)];
console.log("milliseconds, median of", ROUNDS, "rounds (max)");
console.log(formatRow(["store", "rows", ...OPERATIONS], widths));
for (const { kind, rows, times } of results) {
  console.log(formatRow([kind, rows, ...OPERATIONS.map((name) => summary(times[name]))], widths));
}
console.log("\nratio to the baseline GET (medians)");
console.log(formatRow(["store", "rows", ...OPERATIONS], widths));
for (const { kind, rows, times } of results) {
  const baseline = median(times["baseline GET"]);
  console.log(
    formatRow(
      [kind, rows, ...OPERATIONS.map((name) => `${(median(times[name]) / baseline).toFixed(1)}x`)],
      widths,
    ),
  );
}
