import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exitOf, serve } from "../support/process.ts";
import { createTestStore, type TestStore } from "../support/store.ts";

const KEY = "graceful_test_key_0123456789abcdef";

describe("graceful shutdown", { timeout: 60_000 }, () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await createTestStore();
  });
  afterAll(() => store.drop());

  it("answers every keep-alive request sent before SIGTERM and refuses only once closed", async () => {
    const served = await serve({
      CUMULO_DATA_DIR: store.dataDir,
      DATABASE_URL: store.databaseUrl,
      CUMULO_REDIS_PREFIX: store.redisPrefix,
      CUMULO_BOOTSTRAP_API_KEY: KEY,
      CUMULO_RATE_LIMIT: "1000000/1s",
    });
    const headers = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
    let ok = 0;
    let refused = 0;
    const failures: string[] = [];
    let toldToReconnect = 0;
    let signalled = false;
    const exited = exitOf(served.child);
    // Fetch keeps connections alive; each client loops until the server is gone.
    const client = async (n: number) => {
      for (let i = 0; ; i++) {
        try {
          const response = await fetch(`${served.apiUrl}/v1/media/libraries`, {
            method: "POST",
            headers,
            body: JSON.stringify({ name: `client ${n} #${i}` }),
          });
          await response.text();
          if (response.status === 201) ok++;
          else failures.push(`status ${response.status}`);
          if (response.headers.get("connection") === "close") toldToReconnect++;
        } catch (error) {
          const code = (error as { cause?: { code?: string } }).cause?.code;
          // Refusals are expected only once the listener has closed, that is after the signal.
          if (code === "ECONNREFUSED" && signalled) {
            refused++;
            return;
          }
          failures.push(String(code ?? error));
          return;
        }
      }
    };
    const clients = Array.from({ length: 8 }, (_, n) => client(n));
    while (ok < 200) await new Promise((resolve) => setImmediate(resolve));
    signalled = true;
    served.child.kill("SIGTERM");
    await Promise.all(clients);
    expect(await exited).toBe(0);
    expect(failures).toEqual([]);
    expect(refused).toBe(8);
    expect(ok).toBeGreaterThanOrEqual(200);
    expect(toldToReconnect).toBeGreaterThan(0);
  });
});
