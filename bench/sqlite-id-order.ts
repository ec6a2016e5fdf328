/**
 * What the order of new rows' ids costs a SQLite write as the tables grow: CPU per webhook
 * notification (the emitter's statements: its endpoints read, the message and its first attempt
 * inserted, committed), with random version 4 UUIDs for the message and attempt ids (as before
 * session 15) against time-ordered version 7 ones (`timeOrderedUuid`, as now). On a store made by
 * Cumulo's migrations with the store's journal, sync and foreign key pragmas, each kind on a file of
 * its own, in alternating blocks of BENCH_BLOCK (10000) notifications until BENCH_ROWS (50000).
 * `npx tsx bench/sqlite-id-order.ts`. Prints µs per notification per block, and the ratios last.
 */
import { randomUUID } from "node:crypto";
import { timeOrderedUuid } from "../src/ids.ts";
import { migratedSqlite } from "./support.ts";

const BLOCK = Number(process.env.BENCH_BLOCK ?? 10_000);
const ROWS = Number(process.env.BENCH_ROWS ?? 50_000);
const BODY = JSON.stringify({ event: "ready", payload: { text: "x".repeat(500) } });

/** A migrated store with one organization, library endpoint and the emitter's statements prepared. */
async function emitterOn(newId: () => string) {
  const { db, organizationId, close } = await migratedSqlite();
  const now = new Date().toISOString();
  const libraryId = randomUUID();
  const endpointId = randomUUID();
  db.prepare(
    `insert into webhook_endpoints (id, organization_id, library_id, name, url, events, secret, is_active,
     created_at, updated_at) values (?, ?, ?, 'bench', 'http://127.0.0.1/', '["ready"]', 'secret', 1, ?, ?)`,
  ).run(endpointId, organizationId, libraryId, now, now);
  const endpoints = db.prepare(
    'select "id", "events" from "webhook_endpoints" where "library_id" = ? and "is_active" = ?',
  );
  const message = db.prepare(
    `insert into webhook_messages (id, organization_id, library_id, video_id, event, body, created_at)
     values (?, ?, ?, ?, 'ready', ?, ?)`,
  );
  const attempt = db.prepare(
    `insert into webhook_deliveries (id, message_id, endpoint_id, organization_id, library_id, video_id, event,
     attempt, state, due_at, locked_until, success, manual, created_at, updated_at)
     values (?, ?, ?, ?, ?, ?, 'ready', 1, 'pending', ?, null, 0, 0, ?, ?)`,
  );
  const emit = db.transaction(() => {
    const at = new Date().toISOString();
    const videoId = randomUUID();
    endpoints.all(libraryId, 1);
    const messageId = `msg_${newId().replace(/-/g, "")}`;
    message.run(messageId, organizationId, libraryId, videoId, BODY, at);
    attempt.run(newId(), messageId, endpointId, organizationId, libraryId, videoId, at, at, at);
  });
  return { emit, close };
}

/** CPU µs per notification over `count` of them. */
function cpuPerEmit(emit: () => void, count: number): number {
  const before = process.cpuUsage();
  for (let i = 0; i < count; i++) emit();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / count;
}

const kinds = {
  random: await emitterOn(() => randomUUID()),
  ordered: await emitterOn(() => timeOrderedUuid()),
};
const ratios: string[] = [];
console.log(`CPU µs per notification, blocks of ${BLOCK}`);
console.log("rows before | random v4 | time-ordered v7 | ratio");
for (let rows = 0; rows < ROWS; rows += BLOCK) {
  const random = cpuPerEmit(kinds.random.emit, BLOCK);
  const ordered = cpuPerEmit(kinds.ordered.emit, BLOCK);
  const ratio = (ordered / random).toFixed(3);
  console.log(
    `${String(rows).padStart(11)} | ${random.toFixed(1).padStart(9)} | ${ordered.toFixed(1).padStart(15)} | ${ratio}`,
  );
  ratios.push(`${rows}-${rows + BLOCK} rows: ${ratio}`);
}
for (const kind of Object.values(kinds)) await kind.close();
console.log("\nratios (time-ordered / random ids, CPU per notification):");
for (const line of ratios) console.log(`  ${line}`);
