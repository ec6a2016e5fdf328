// A process that opens the SQLite store in CUMULO_DATA_DIR, prints "opened", and migrates it when a
// line arrives on stdin: a test can then start several migrations within the same few milliseconds.
// Run with `node --import tsx` (test/core/sqlite-concurrent-migrations.test.ts).
import { once } from "node:events";
import { openStore } from "../../src/store/database.ts";

// KILL_AT_QUERY=n stands for a crash mid-migration: the process dies just after its nth query.
const killAtQuery = Number(process.env.KILL_AT_QUERY ?? 0);
let queries = 0;
const store = openStore({
  dataDir: process.env.CUMULO_DATA_DIR ?? "",
  databaseUrl: undefined,
  onQuery: () => {
    queries += 1;
    if (queries === killAtQuery) process.kill(process.pid, "SIGKILL");
  },
});
process.stdout.write("opened\n");
await once(process.stdin, "data");
try {
  await store.migrate(() => process.stdout.write("waiting\n"));
  process.stdout.write(`migrated after ${queries} queries\n`);
} catch (error) {
  process.stdout.write(`failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
} finally {
  await store.close();
}
