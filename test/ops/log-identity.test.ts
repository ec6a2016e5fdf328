import { hostname } from "node:os";
import { expect, it } from "vitest";
import { serve, stopAll } from "../support/process.ts";
import { createTestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";

/** Nodes writing to one log stream (a file, syslog) must be told apart by their lines alone. */
it("names the machine and the process on every JSON log line", { timeout: 120_000 }, async () => {
  const store = await createTestStore();
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
