/**
 * What group commit would save on SQLite: CPU per API key insert (the write of a token creation, with
 * its `RETURNING *`, foreign keys on) committed alone, against groups of 2, 4 and 8 inserts in one
 * transaction, each in a savepoint of its own (as a group commit would need, so that one failing
 * insert leaves the others). On a store made by Cumulo's migrations, with the store's journal, sync
 * and foreign key pragmas (checkpoints as SQLite does them by default), in alternating rounds. `npx tsx bench/sqlite-group-commit.ts`; BENCH_WRITES (20000), BENCH_ROUNDS (3).
 * Ratios (grouped / alone) are printed last.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { median } from "./figures.ts";
import { migratedSqlite } from "./support.ts";

const WRITES = Number(process.env.BENCH_WRITES ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const GROUPS = [1, 2, 4, 8];

const { db, organizationId, close } = await migratedSqlite();
const now = new Date().toISOString();
const userId = db
  .prepare("insert into users (uuid, organization_id, name, email, created_at) values (?, ?, ?, ?, ?)")
  .run(randomUUID(), organizationId, "bench", "bench@example.com", now).lastInsertRowid;
const insert = db.prepare(
  `insert into api_keys (organization_id, user_id, kind, name, description, prefix, key_hash, read_only,
   restricted, billing_account_id, consumer_id, created_at, updated_at)
   values (?, ?, 'cloud_token', 'cloud token', 'bench', 'ck_', ?, 0, 0, null, ?, ?, ?) returning *`,
);
const begin = db.prepare("begin");
const commit = db.prepare("commit");
const savepoint = db.prepare("savepoint one");
const release = db.prepare("release one");
const insertOne = () =>
  insert.get(organizationId, userId, randomBytes(32).toString("hex"), randomUUID(), now, now);

/** CPU µs per insert, inserting WRITES keys in groups of `group` (1: each committed alone). */
function cpuPerInsert(group: number): number {
  const before = process.cpuUsage();
  for (let done = 0; done < WRITES; done += group) {
    if (group === 1) {
      insertOne();
      continue;
    }
    begin.run();
    for (let i = 0; i < group; i++) {
      savepoint.run();
      insertOne();
      release.run();
    }
    commit.run();
  }
  const used = process.cpuUsage(before);
  return (used.user + used.system) / WRITES;
}

cpuPerInsert(1); // warm-up
const figures = new Map<number, number[]>(GROUPS.map((group) => [group, []]));
console.log(`# ${WRITES} api_keys inserts per measurement, ${ROUNDS} alternating rounds`);
console.log("| round | group | CPU µs per insert |");
console.log("|---|---|---|");
for (let round = 1; round <= ROUNDS; round++) {
  for (const group of GROUPS) {
    const micros = cpuPerInsert(group);
    figures.get(group)?.push(micros);
    console.log(`| ${round} | ${group} | ${micros.toFixed(1)} |`);
  }
}
await close();

const alone = median(figures.get(1) ?? []);
console.log("\nratios (median CPU per insert, grouped / alone):");
for (const group of GROUPS.slice(1)) {
  const grouped = median(figures.get(group) ?? []);
  console.log(
    `group of ${group}: ${(grouped / alone).toFixed(3)} (${grouped.toFixed(1)} / ${alone.toFixed(1)} µs)`,
  );
}
