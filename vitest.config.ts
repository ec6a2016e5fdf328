import { defineConfig } from "vitest/config";

// The whole suite runs once per store: always on SQLite, and on PostgreSQL when TEST_DATABASE_URL is set.
const stores = process.env.TEST_DATABASE_URL ? ["sqlite", "postgres"] : ["sqlite"];

export default defineConfig({
  test: {
    projects: stores.map((store) => ({
      extends: true,
      test: {
        name: store,
        env: { CUMULO_TEST_STORE: store },
      },
    })),
    include: ["test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 20_000,
    hookTimeout: 30_000,
  },
});
