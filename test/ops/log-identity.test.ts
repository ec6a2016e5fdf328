import { hostname } from "node:os";
import { expect, it } from "vitest";
import { latestMigration } from "../../src/store/migrations/index.ts";
import { serve, stopAll } from "../support/process.ts";
import { createMigratedTestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";

/** Nodes writing to one log stream (a file, syslog) must be told apart by their lines alone. */
it("names the machine and the process on every JSON log line", { timeout: 120_000 }, async () => {
  const store = await createMigratedTestStore();
  const node = await serve({
    CUMULO_DATA_DIR: store.dataDir,
    DATABASE_URL: store.databaseUrl,
    CUMULO_ROLES: "api",
    CUMULO_LOG_LEVEL: "info",
  });
  try {
    expect((await fetch(`${node.apiUrl}/v1/media/libraries`)).status).toBe(401);
    const jsonLines = () =>
      node
        .output()
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    await waitUntil(() => jsonLines().some((line) => line.msg === "request completed"));
    for (const line of jsonLines()) {
      expect(line).toMatchObject({ hostname: hostname(), pid: node.child.pid });
    }
  } finally {
    await stopAll([node]);
    await store.drop();
  }
});

/** Which store, media storage and Redis a node uses, read from its output; never a credential. */
it("says at start what the node runs on, without the credentials of its settings", {
  timeout: 120_000,
}, async () => {
  const store = await createMigratedTestStore();
  const password = "a-database-password-not-to-print";
  // PostgreSQL in the tests trusts local connections, so a password in the URL is accepted unread.
  const databaseUrl = store.databaseUrl?.replace("postgres://postgres@", `postgres://postgres:${password}@`);
  const secrets = {
    CUMULO_SECRET_KEY: "a-secret-key-not-to-print-0123456789abcdef",
    CUMULO_BOOTSTRAP_API_KEY: "a_bootstrap_key_not_to_print_0123",
    CUMULO_METRICS_TOKEN: "a-metrics-token-not-to-print",
  };
  const node = await serve({
    CUMULO_DATA_DIR: store.dataDir,
    DATABASE_URL: databaseUrl,
    CUMULO_ROLES: "api",
    CUMULO_REDIS_PREFIX: "cumulo-start-line:",
    ...secrets,
  });
  try {
    const line = /^Cumulo \S+ \(schema \S+; roles: api\): .*$/m.exec(node.output())?.[0] ?? node.output();
    // The store schema this build runs on: builds of one version may differ in it.
    expect(line).toContain(`(schema ${latestMigration()}; roles: api)`);
    const storeText = databaseUrl
      ? `store PostgreSQL at ${new URL(databaseUrl).host}${new URL(databaseUrl).pathname}`
      : `store SQLite at ${store.dataDir}/cumulo.sqlite`;
    expect(line).toContain(storeText);
    expect(line).toContain(`media files in ${store.dataDir}/blobs`);
    expect(line).toContain(`data dir ${store.dataDir}`);
    // An API node of a split deployment keeping media files on its own disk: the workers never see them.
    const splitWarning =
      /^cumulo: warning: this node runs api only, with media files in its own data dir .* set CUMULO_BLOB_STORE=s3/m;
    if (databaseUrl) expect(node.output()).toMatch(splitWarning);
    else expect(node.output()).not.toMatch(splitWarning);
    for (const secret of [password, ...Object.values(secrets)]) expect(node.output()).not.toContain(secret);
  } finally {
    await stopAll([node]);
    await store.drop();
  }
});
