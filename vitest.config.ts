import { availableParallelism } from "node:os";
import { configDefaults, defineConfig } from "vitest/config";

/** How many test files run at once when set (a positive integer); anything else takes the default. */
const TEST_WORKERS = Number.parseInt(process.env.TEST_WORKERS ?? "", 10);

// Each project migrates one store, which test apps' stores copy (test/support/store-template.ts).
const STORE_TEMPLATE = "test/support/store-template.ts";

// The whole suite runs once per store: always on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
const stores = process.env.TEST_DATABASE_URL ? ["sqlite", "postgres"] : ["sqlite"];

export default defineConfig({
  test: {
    projects: [
      ...stores.map((store) => ({
        extends: true as const,
        test: {
          name: store,
          env: { CUMULO_TEST_STORE: store },
          include: ["test/**/*.test.ts"],
          exclude: [...configDefaults.exclude, "test/console/**"],
          globalSetup: [STORE_TEMPLATE],
        },
      })),
      // The console in a real browser, once, on SQLite: the store is not what these tests are about.
      {
        extends: true as const,
        test: {
          name: "console",
          env: { CUMULO_TEST_STORE: "sqlite" },
          include: ["test/console/**/*.test.ts"],
          globalSetup: [STORE_TEMPLATE, "test/console/build-console.ts"],
          testTimeout: 120_000,
        },
      },
    ],
    pool: "forks",
    // One worker runs file after file with the modules it has loaded: importing the app anew for each
    // file was over half the suite's CPU on 2 cores. Each test still starts its own app on its own
    // store; what files share is module-level state (constants, and a few process-wide counters and
    // caches such as the clock-read count), and spies on prototypes see every app in the worker.
    isolate: false,
    // Most test files wait on child processes, sockets and timers rather than compute: on a 2-core
    // machine vitest's default (one worker per core but one) ran them one at a time, half the CPU idle.
    maxWorkers: TEST_WORKERS > 0 ? TEST_WORKERS : Math.max(4, availableParallelism()),
    // Generous on purpose: CI runs four files at once on 2 cores, where a test that takes 4 s alone once
    // took over 20 s. A timeout only has to catch a hang; waits return as soon as their condition holds.
    testTimeout: 60_000,
    hookTimeout: 90_000,
  },
});
