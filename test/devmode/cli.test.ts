import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary } from "../media/helpers.ts";
import { ADMIN_KEY, startTestApp } from "../support/app.ts";
import { runCli } from "../support/cli.ts";
import { exitOf, serve } from "../support/process.ts";
import { createMigratedTestStore, type TestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";

describe("cumulo state save | load | reset", () => {
  let store: TestStore;
  let env: Record<string, string | undefined>;
  beforeAll(async () => {
    store = await createMigratedTestStore();
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
    // Three starts and three CLI processes (each transpiles at start): minutes on a loaded machine.
  }, 240_000);

  it("names what is wrong with a missing or malformed snapshot", async () => {
    const missing = await runCli(["state", "load", "nothing_here"], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("snapshot nothing_here not found");
    const malformed = await runCli(["state", "save", "Bad Name"], env);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain("snapshot name must be");
  }, 120_000);

  it("seeds from a YAML or JSON file, all or nothing, and resets one organization", async () => {
    const work = mkdtempSync(join(tmpdir(), "cumulo-cli-seed-"));
    try {
      const yamlFile = join(work, "world.yaml");
      writeFileSync(
        yamlFile,
        [
          "organizations:",
          "  - name: From YAML",
          "    api_key: yaml_cli_key_0123456789abc",
          "    libraries:",
          "      - name: Seeded",
          "        videos:",
          "          - title: First",
          "    cloud:",
          "      disks:",
          "        - size_gb: 2",
          "",
        ].join("\n"),
      );
      const seeded = await runCli(["state", "seed", yamlFile], env);
      expect(seeded.code, seeded.stderr).toBe(0);
      const [organization] = JSON.parse(seeded.stdout).organizations;
      expect(organization.libraries[0].videos[0].title).toBe("First");

      const refusedFile = join(work, "refused.json");
      writeFileSync(
        refusedFile,
        JSON.stringify({ organizations: [{ name: "Half", distributions: [{ hostname: "not a host" }] }] }),
      );
      const refused = await runCli(["state", "seed", refusedFile], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("seeding stopped at organizations[0].distributions[0]");
      writeFileSync(join(work, "world.txt"), "{}");
      const unknownKind = await runCli(["state", "seed", join(work, "world.txt")], env);
      expect(unknownKind.stderr).toContain("ends in .json, .yaml or .yml");
      writeFileSync(join(work, "bad.yml"), "organizations:\n  - title: nameless\n");
      const invalid = await runCli(["state", "seed", join(work, "bad.yml")], env);
      expect(invalid.code).toBe(1);
      expect(invalid.stderr).toContain("bad.yml: /organizations/0");

      const app = await startTestApp({}, { store });
      try {
        const libraries = await app.request("GET", "/v1/media/libraries", {
          key: "yaml_cli_key_0123456789abc",
        });
        expect(libraries.body.data.map((library: { name: string }) => library.name)).toEqual(["Seeded"]);
        const names = (await app.cumulo.services.identity.listOrganizations()).map((org) => org.name);
        expect(names).not.toContain("Half");
      } finally {
        await app.close();
      }

      const reset = await runCli(["state", "reset", "--org", organization.id], env);
      expect(reset.code, reset.stderr).toBe(0);
      const after = await startTestApp({}, { store });
      try {
        const libraries = await after.request("GET", "/v1/media/libraries", {
          key: "yaml_cli_key_0123456789abc",
        });
        expect(libraries.status).toBe(200);
        expect(libraries.body.data).toEqual([]);
      } finally {
        await after.close();
      }
      const missing = await runCli(["state", "reset", "--org", organization.id, "--to", "empty"], env);
      expect(missing.code, missing.stderr).toBe(0);
      const gone = await runCli(["state", "reset", "--org", organization.id], env);
      expect(gone.code).toBe(1);
      expect(gone.stderr).toContain(`organization ${organization.id} not found`);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 240_000);

  it("cumulo dev seeds the store once started and takes its transitions from flags", async () => {
    const work = mkdtempSync(join(tmpdir(), "cumulo-dev-seed-"));
    const file = join(work, "world.yml");
    writeFileSync(file, "organizations:\n  - name: Dev seeded\n    api_key: dev_seed_key_0123456789abc\n");
    const devStore = await createMigratedTestStore();
    const served = await serve(
      {
        CUMULO_DATA_DIR: devStore.dataDir,
        DATABASE_URL: devStore.databaseUrl,
        CUMULO_BOOTSTRAP_API_KEY: ADMIN_KEY,
        CUMULO_REDIS_PREFIX: devStore.redisPrefix,
      },
      ["dev", "--seed", file, "--libraries", "instant", "--videos", "instant"],
      // A process that transpiles at start and seeds before it is ready: slow on a busy machine.
      90_000,
    );
    try {
      expect(served.output()).toContain('"name": "Dev seeded"');
      const headers = { authorization: `Bearer ${ADMIN_KEY}` };
      const transitions = await fetch(`${served.apiUrl}/_cumulo/transitions`, { headers });
      expect(((await transitions.json()) as { default: unknown }).default).toEqual({
        video: "instant",
        library: "instant",
      });
      const seededKey = { authorization: "Bearer dev_seed_key_0123456789abc" };
      const created = await fetch(`${served.apiUrl}/v1/media/libraries`, {
        method: "POST",
        headers: { ...seededKey, "content-type": "application/json" },
        body: JSON.stringify({ name: "Quick" }),
      });
      const { data } = (await created.json()) as { data: { id: string } };
      const got = await fetch(`${served.apiUrl}/v1/media/libraries/${data.id}`, { headers: seededKey });
      expect(((await got.json()) as { data: { status: string } }).data.status).toBe("active");
    } finally {
      served.child.kill("SIGTERM");
      await exitOf(served.child);
      await devStore.drop();
      rmSync(work, { recursive: true, force: true });
    }
  }, 150_000);
});

describe("cumulo state reset where the bootstrap key is gone", () => {
  let store: TestStore;
  let env: Record<string, string | undefined>;
  beforeAll(async () => {
    store = await createMigratedTestStore();
    env = { CUMULO_DATA_DIR: store.dataDir, DATABASE_URL: store.databaseUrl, CUMULO_BOOTSTRAP_API_KEY: "" };
  });
  afterAll(() => store.drop());

  const startWithout = (bootstrapKey = "") =>
    startTestApp({ CUMULO_DEV_MODE: "true", CUMULO_BOOTSTRAP_API_KEY: bootstrapKey }, { store });

  it("generates a new operator key (printed once), or adds the configured one back", async () => {
    // First start without a bootstrap key: the default organization and its printed key.
    const first = await startWithout();
    const printed = first.cumulo.generatedKey ?? "";
    expect(printed).not.toBe("");
    const { identity } = first.cumulo.services;
    const [organization] = await identity.listOrganizations();
    const [key] = (await identity.listApiKeys(organization.id)) ?? [];
    const library = await createLibrary(first, { name: "Before the reset" }, printed);
    // An admin key made since, which a reset to bootstrap removes like any other.
    const since = await identity.createApiKey(organization.id, { name: "made since", readOnly: false });
    const madeSince = since.outcome === "created" ? since.api_key : "";
    // The printed key revoked: before, the reset took the key made since for the operator's and
    // kept it, and generated none.
    expect((await identity.revokeOrganizationApiKey(organization.id, key.id)).outcome).toBe("revoked");
    await first.close();

    const reset = await runCli(["state", "reset"], env);
    expect(reset.code, reset.stderr).toBe(0);
    const generated: string = JSON.parse(reset.stdout).generated_key;
    expect(generated).toMatch(/^cmk_/);
    expect(generated).not.toBe(printed);

    // A restart prints nothing new: the generated key is the operator's, on the same organization.
    const second = await startWithout();
    try {
      expect(second.cumulo.generatedKey).toBeUndefined();
      expect((await second.request("GET", "/_cumulo", { key: generated })).status).toBe(200);
      expect((await second.request("GET", "/_cumulo", { key: printed })).status).toBe(401);
      expect((await second.request("GET", "/_cumulo", { key: madeSince })).status).toBe(401);
      expect(await second.cumulo.services.identity.listOrganizations()).toEqual([organization]);
      const gone = await second.request("GET", `/v1/media/libraries/${library.id}`, { key: generated });
      expect(gone.status).toBe(404);
    } finally {
      await second.close();
    }

    // With CUMULO_BOOTSTRAP_API_KEY the configured key is added back, and nothing is generated. Read
    // from the store, not through a start, which would add the key itself.
    const withKey = await runCli(["state", "reset"], { ...env, CUMULO_BOOTSTRAP_API_KEY: ADMIN_KEY });
    expect(withKey.code, withKey.stderr).toBe(0);
    expect(JSON.parse(withKey.stdout)).toEqual({ reset: "bootstrap" });
    const listed = await runCli(["keys", "list", "--org", organization.id], env);
    expect(listed.code, listed.stderr).toBe(0);
    expect(
      JSON.parse(listed.stdout).map((row: { name: string; prefix: string }) => [row.name, row.prefix]),
    ).toEqual([["bootstrap", ADMIN_KEY.slice(0, 7)]]);
  }, 240_000);
});
