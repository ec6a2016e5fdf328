import { sql } from "kysely";
import { StateRepository } from "../src/devmode/state-repository.ts";
import { BENCH_KEY, benchStores, formatRow, startBenchCumulo } from "./support.ts";

/**
 * Developer mode: how long saving and loading a snapshot takes (over HTTP, as a test suite calls it
 * between tests) on a store of a few thousand rows.
 */
const ORGANIZATIONS = Number(process.env.BENCH_ORGANIZATIONS ?? 800);
const ROUNDS = 5;
const headers = { authorization: `Bearer ${BENCH_KEY}` };

async function timed(url: string, method: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(url, { method, headers });
  if (!response.ok) throw new Error(`${method} ${url} -> ${response.status}: ${await response.text()}`);
  await response.arrayBuffer();
  return performance.now() - started;
}

const summary = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return `${sorted[Math.floor(sorted.length / 2)]?.toFixed(1)} ms (max ${sorted.at(-1)?.toFixed(1)})`;
};

const widths = [10, 8, 28, 28];
console.log(formatRow(["store", "rows", "save median", "load median"], widths));
for (const kind of benchStores()) {
  const bench = await startBenchCumulo(kind, { CUMULO_DEV_MODE: "true", CUMULO_ROLES: "api" });
  try {
    const { identity } = bench.cumulo.services;
    for (let i = 0; i < ORGANIZATIONS; i++) await identity.createOrganization(`bench ${i}`);
    const db = bench.cumulo.store.db;
    let rows = 0;
    for (const table of await new StateRepository(db, bench.store.kind).tables()) {
      const { rows: counted } = await sql<{ n: number }>`select count(*) as n from ${sql.id(table)}`.execute(
        db,
      );
      rows += Number(counted[0]?.n ?? 0);
    }
    const base = `${bench.cumulo.apiUrl}/_cumulo/state/snapshots/bench`;
    const saves: number[] = [];
    const loads: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      saves.push(await timed(base, "PUT"));
      loads.push(await timed(`${base}/load`, "POST"));
    }
    console.log(formatRow([kind, rows, summary(saves), summary(loads)], widths));
  } finally {
    await bench.close();
  }
}
