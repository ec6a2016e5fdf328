/**
 * SQLite WAL checkpoints on the event loop against on a worker thread (`SqliteCheckpointer`): the time
 * of each small write transaction, as the event loop sees it, for a run of writes with SQLite's
 * default automatic checkpoint (1,000 pages) and for the store's set-up (worker thread, fallback at
 * 10,000 pages), in alternating rounds on fresh files. `npx tsx bench/sqlite-checkpoints.ts`;
 * BENCH_WRITES (20000), BENCH_ROUNDS (3). Ratios (store set-up / default) are printed last.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import SqliteDatabase from "better-sqlite3";
import { FALLBACK_CHECKPOINT_PAGES, SqliteCheckpointer } from "../src/store/sqlite-checkpointer.ts";
import { median } from "./figures.ts";

const WRITES = Number(process.env.BENCH_WRITES ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

interface Figures {
  totalMs: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
}

async function run(offThread: boolean): Promise<Figures> {
  const dir = mkdtempSync(join(tmpdir(), "cumulo-bench-checkpoints-"));
  const path = join(dir, "bench.sqlite");
  const db = new SqliteDatabase(path);
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("busy_timeout = 5000");
  if (offThread) db.pragma(`wal_autocheckpoint = ${FALLBACK_CHECKPOINT_PAGES}`);
  const checkpointer = offThread ? new SqliteCheckpointer(path) : undefined;
  db.exec("create table rows (id integer primary key, body text not null)");
  const insert = db.prepare("insert into rows (body) values (?)");
  const write = db.transaction((body: string) => insert.run(body));
  const body = "x".repeat(1000);
  const times: number[] = [];
  const started = performance.now();
  for (let i = 0; i < WRITES; i++) {
    const before = performance.now();
    write(body);
    times.push(performance.now() - before);
    // Let the event loop turn now and then, as a server's would between requests.
    if (i % 100 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  const totalMs = performance.now() - started;
  await checkpointer?.stop();
  db.close();
  rmSync(dir, { recursive: true, force: true });
  times.sort((a, b) => a - b);
  const at = (share: number) => times[Math.min(times.length - 1, Math.floor(share * times.length))] ?? 0;
  return { totalMs, p50: at(0.5), p99: at(0.99), p999: at(0.999), max: at(1) };
}

console.log(`# ${WRITES} write transactions of 1 KB per run, ${ROUNDS} alternating rounds`);
console.log("| round | checkpoints | total ms | p50 ms | p99 ms | p99.9 ms | max ms |");
console.log("|---|---|---|---|---|---|---|");
const results: Record<"default" | "worker", Figures[]> = { default: [], worker: [] };
for (let round = 1; round <= ROUNDS; round++) {
  for (const kind of ["default", "worker"] as const) {
    const figures = await run(kind === "worker");
    results[kind].push(figures);
    const cells = [figures.totalMs, figures.p50, figures.p99, figures.p999, figures.max].map((value) =>
      value.toFixed(value < 10 ? 3 : 0),
    );
    console.log(
      `| ${round} | ${kind === "worker" ? "worker thread" : "event loop (default)"} | ${cells.join(" | ")} |`,
    );
  }
}
console.log("\n## Ratios (worker thread / event loop, medians of the rounds; below 1 favours the worker)");
for (const figure of ["totalMs", "p99", "p999", "max"] as const) {
  const ratio = median(results.worker.map((r) => r[figure])) / median(results.default.map((r) => r[figure]));
  console.log(`- ${figure}: ${ratio.toFixed(2)}`);
}
