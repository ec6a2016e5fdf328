import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type Store } from "../../src/store/database.ts";
import { createTestStore, type TestStore } from "../support/store.ts";

describe("the store's readiness check, which /readyz and the metrics listener's /readyz ask", () => {
  let testStore: TestStore;
  let store: Store;
  // The store's own query hook, which feeds cumulo_store_query_duration_seconds.
  let queries = 0;

  beforeAll(async () => {
    testStore = await createTestStore();
    store = openStore({
      dataDir: testStore.dataDir,
      databaseUrl: testStore.databaseUrl,
      onQuery: () => {
        queries++;
      },
    });
  });
  afterAll(() => testStore.drop());

  it("is one query for probes that arrive together, and asks again for the next", async () => {
    const before = queries;
    const answers = await Promise.all(Array.from({ length: 50 }, () => store.readiness()));
    expect(answers).toEqual(Array(50).fill("ready"));
    expect(queries - before).toBe(1);
    // No answer is kept once given: a store that went away is seen by the next probe.
    await store.close();
    expect(await store.readiness()).toBe("unavailable");
  });
});
