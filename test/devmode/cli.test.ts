import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary } from "../media/helpers.ts";
import { ADMIN_KEY, startTestApp } from "../support/app.ts";
import { runCli } from "../support/cli.ts";
import { createTestStore, type TestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";

describe("cumulo state save | load | reset", () => {
  let store: TestStore;
  let env: Record<string, string | undefined>;
  beforeAll(async () => {
    store = await createTestStore();
    env = {
      CUMULO_DATA_DIR: store.dataDir,
      DATABASE_URL: store.databaseUrl,
      CUMULO_BOOTSTRAP_API_KEY: ADMIN_KEY,
    };
  });
  afterAll(() => store.drop());

  it("saves a stopped server's store, empties it, and brings it back", async () => {
    const first = await startTestApp({}, { store });
    const library = await createLibrary(first, { name: "From the CLI" });
    // Provisioning done first: the snapshot is of a quiet store.
    await waitUntil(
      async () =>
        (await first.request("GET", `/v1/media/libraries/${library.id}`)).body.data.status === "active",
    );
    await first.close();

    const saved = await runCli(["state", "save", "cli_one"], env);
    expect(saved.code, saved.stderr).toBe(0);
    expect(JSON.parse(saved.stdout).name).toBe("cli_one");
    const reset = await runCli(["state", "reset"], env);
    expect(reset.code, reset.stderr).toBe(0);

    const afterReset = await startTestApp({}, { store });
    expect((await afterReset.request("GET", `/v1/media/libraries/${library.id}`)).status).toBe(404);
    await afterReset.close();

    const loaded = await runCli(["state", "load", "cli_one"], env);
    expect(loaded.code, loaded.stderr).toBe(0);
    const afterLoad = await startTestApp({}, { store });
    expect((await afterLoad.request("GET", `/v1/media/libraries/${library.id}`)).status).toBe(200);
    await afterLoad.close();
    // Three starts and three CLI processes on a loaded machine.
  }, 120_000);

  it("names what is wrong with a missing or malformed snapshot", async () => {
    const missing = await runCli(["state", "load", "nothing_here"], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("snapshot nothing_here not found");
    const malformed = await runCli(["state", "save", "Bad Name"], env);
    expect(malformed.code).toBe(1);
    expect(malformed.stderr).toContain("snapshot name must be");
  }, 60_000);
});
