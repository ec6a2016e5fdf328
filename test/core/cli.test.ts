import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_VERSION } from "../../src/version.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { BIN, runCli } from "../support/cli.ts";
import { createTestStore, testStoreKind } from "../support/store.ts";

// Each case runs the real binary several times (one case fourteen), each start compiling TypeScript:
// on a loaded machine that alone can pass the suite's default 20 s, so the bound here is wider.
describe("cumulo CLI", { timeout: 180_000 }, () => {
  let t: TestApp;
  let env: Record<string, string | undefined>;

  beforeAll(async () => {
    // The CLI administers the same store while the server runs on it.
    t = await startTestApp();
    env = { CUMULO_DATA_DIR: t.store.dataDir, DATABASE_URL: t.store.databaseUrl };
  });
  afterAll(() => t.close());

  it("names every state subcommand in the top-level help, seed included", async () => {
    const help = await runCli(["--help"], env);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/state\s+developer mode: reset, save, load or seed\s+the store/);
  });

  it("creates an organization whose admin key works on the running server", async () => {
    const result = await runCli(["orgs", "create", "--name", "Acme"], env);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const created = JSON.parse(result.stdout);
    expect(Object.keys(created).sort()).toEqual([
      "api_key",
      "billing_account_id",
      "organization_id",
      "user_id",
    ]);
    expect(created.organization_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(Number.isInteger(created.user_id)).toBe(true);
    expect(Number.isInteger(created.billing_account_id)).toBe(true);
    const health = await t.request("GET", "/v1/livestream/health", { key: created.api_key });
    expect(health.status).toBe(200);

    const list = JSON.parse((await runCli(["orgs", "list"], env)).stdout);
    expect(list.map((org: { name: string }) => org.name)).toEqual(
      expect.arrayContaining(["Default", "Acme"]),
    );
  });

  it("says so when a store command made the store it was pointed at, as a mistyped setting does", async () => {
    const empty = await createTestStore();
    try {
      const mistyped = { CUMULO_DATA_DIR: empty.dataDir, DATABASE_URL: empty.databaseUrl };
      // Before: only "not found", and an operator took the leaked key for revoked.
      const revoke = await runCli(["keys", "revoke", "2"], mistyped);
      expect(revoke.code).toBe(1);
      expect(revoke.stderr).toMatch(
        /^cumulo: note: (?:CUMULO_DATA_DIR \(.+\) held|DATABASE_URL names a database that held) no Cumulo store; a new, empty one was made there\. If you meant a server's store, check that setting\.\ncumulo: key 2 not found or already revoked\n$/,
      );
      const again = await runCli(["orgs", "list"], mistyped);
      expect([again.code, again.stderr, again.stdout.trim()]).toEqual([0, "", "[]"]);
    } finally {
      await empty.drop();
    }
  });

  it("creates, lists and revokes keys; a revoked key stops working at once", async () => {
    const org = JSON.parse((await runCli(["orgs", "create", "--name", "Keys Inc"], env)).stdout);
    const created = await runCli(
      ["keys", "create", "--org", org.organization_id, "--name", "ci", "--read-only"],
      env,
    );
    expect(created.code).toBe(0);
    const key = JSON.parse(created.stdout);
    expect(Object.keys(key).sort()).toEqual(["api_key", "id", "prefix"]);
    expect(key.api_key.startsWith(key.prefix)).toBe(true);
    expect((await t.request("GET", "/v1/livestream/health", { key: key.api_key })).status).toBe(200);

    const listed = JSON.parse((await runCli(["keys", "list", "--org", org.organization_id], env)).stdout);
    const entry = listed.find((item: { id: number }) => item.id === key.id);
    expect(entry).toMatchObject({ name: "ci", prefix: key.prefix, read_only: true });
    expect(JSON.stringify(listed)).not.toContain(key.api_key);

    const revoked = await runCli(["keys", "revoke", String(key.id)], env);
    expect(revoked.code).toBe(0);
    expect((await t.request("GET", "/v1/livestream/health", { key: key.api_key })).status).toBe(401);
  });

  it("deletes an organization with everything it holds, only when confirmed, and no other", async () => {
    const leaving = JSON.parse((await runCli(["orgs", "create", "--name", "Leaving Ltd"], env)).stdout);
    const theirs = await t.request("POST", "/v1/media/libraries", {
      key: leaving.api_key,
      json: { name: "their library" },
    });
    expect(theirs.status).toBe(201);
    const ours = await t.request("POST", "/v1/media/libraries", { json: { name: "our library" } });

    const unconfirmed = await runCli(["orgs", "delete", "--org", leaving.organization_id], env);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toMatch(/removes all its data for good: add --yes to confirm/);
    expect((await t.request("GET", "/v1/livestream/health", { key: leaving.api_key })).status).toBe(200);

    const deleted = await runCli(["orgs", "delete", "--org", leaving.organization_id, "--yes"], env);
    expect([deleted.code, deleted.stderr]).toEqual([0, ""]);
    expect(JSON.parse(deleted.stdout)).toEqual({ deleted: true, organization_id: leaving.organization_id });
    // Its key is refused at once by the running server; the others' data is as it was.
    expect((await t.request("GET", "/v1/livestream/health", { key: leaving.api_key })).status).toBe(401);
    expect((await t.request("GET", `/v1/media/libraries/${ours.body.data.id}`)).status).toBe(200);
    const left = await t.cumulo.store.db
      .selectFrom("libraries")
      .select("id")
      .where("organization_id", "=", leaving.organization_id)
      .execute();
    expect(left).toEqual([]);
    const listed = JSON.parse((await runCli(["orgs", "list"], env)).stdout);
    expect(listed.map((org: { id: string }) => org.id)).not.toContain(leaving.organization_id);

    const again = await runCli(["orgs", "delete", "--org", leaving.organization_id, "--yes"], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/organization .* not found/);
  });

  // Exit status 2 when the command line is wrong, 1 when the command could not be carried out.
  it("reports errors on stderr with a non-zero exit: 2 for a wrong command line, 1 for a failure", async () => {
    const unknownOrg = await runCli(["keys", "create", "--org", "00000000-0000-4000-8000-000000000000"], env);
    expect(unknownOrg.code).toBe(1);
    expect(unknownOrg.stderr).toMatch(/organization .* not found/);
    expect(unknownOrg.stdout).toBe("");

    const badRevoke = await runCli(["keys", "revoke", "999999"], env);
    expect(badRevoke.code).toBe(1);
    expect(badRevoke.stderr).toMatch(/not found/);

    // The same clear line on both stores (PostgreSQL would otherwise complain about uuid syntax).
    for (const args of [
      ["keys", "create", "--org", "not-a-uuid"],
      ["keys", "list", "--org", "not-a-uuid"],
    ]) {
      const badOrg = await runCli(args, env);
      expect(badOrg.code).toBe(2);
      expect(badOrg.stderr.trim()).toBe('cumulo: --org must be an organization id (UUID), got "not-a-uuid"');
    }
    const hugeId = await runCli(["keys", "revoke", "99999999999999999999"], env);
    expect(hugeId.code).toBe(2);
    expect(hugeId.stderr).toMatch(/key id must be a positive integer/);

    const missingName = await runCli(["orgs", "create"], env);
    expect(missingName.code).toBe(2);
    expect(missingName.stderr).toMatch(/--name/);
    const unknownOption = await runCli(["orgs", "list", "--all"], env);
    expect([unknownOption.code, unknownOption.stdout]).toEqual([2, ""]);
    expect(unknownOption.stderr).toMatch(/^error: unknown option '--all'/);

    // A word that names no command is said to be one, not handed to `serve` as an argument.
    const unknownCommand = await runCli(["org", "list"], env);
    expect(unknownCommand.code).toBe(2);
    expect(unknownCommand.stderr).toMatch(/^error: unknown command 'org'/);
    expect(unknownCommand.stderr).toContain("orgs");
    expect(unknownCommand.stderr).not.toContain("serve'");
    // Help for a command that does not exist says so, as the command itself would.
    const unknownHelp = await runCli(["help", "org"], env);
    expect(unknownHelp.code).toBe(2);
    expect(unknownHelp.stderr).toMatch(/^error: unknown command 'org'/);

    // Names the API would refuse (POST /v1/organization/api-keys takes 1-100 characters).
    const org = JSON.parse((await runCli(["orgs", "create", "--name", "Names Ltd"], env)).stdout);
    for (const [args, message] of [
      [
        ["keys", "create", "--org", org.organization_id, "--name", ""],
        "cumulo: --name must be 1-100 characters, got 0",
      ],
      [
        ["keys", "create", "--org", org.organization_id, "--name", "k".repeat(101)],
        "cumulo: --name must be 1-100 characters, got 101",
      ],
      [
        ["keys", "create", "--org", org.organization_id, "--name", " \t "],
        "cumulo: --name must not be only white space",
      ],
      [
        ["keys", "create", "--org", org.organization_id, "--name", "red\u001b[31m"],
        "cumulo: --name must be text on one line without control characters (U+0000-U+001F, U+007F-U+009F)",
      ],
      [["orgs", "create", "--name", "  "], "cumulo: --name must be 1-255 characters, got 0"],
      [["orgs", "create", "--name", "o".repeat(256)], "cumulo: --name must be 1-255 characters, got 256"],
    ] as const) {
      const refused = await runCli([...args], env);
      expect([refused.code, refused.stderr.trim(), refused.stdout]).toEqual([2, message, ""]);
    }
    expect(
      JSON.parse((await runCli(["keys", "list", "--org", org.organization_id], env)).stdout),
    ).toHaveLength(1);

    // A UUID is the same id in capitals (PostgreSQL's uuid type agrees; SQLite compares text).
    const listed = await runCli(["keys", "list", "--org", org.organization_id.toUpperCase()], env);
    expect([listed.code, listed.stderr, JSON.parse(listed.stdout).length]).toEqual([0, "", 1]);
  });

  it("migrates and names the migrations it applied, none on a store already up to date", async () => {
    const applied = await runCli(["migrate"], env);
    expect([applied.code, JSON.parse(applied.stdout)]).toEqual([0, { migrated: true, applied: [] }]);
    const fresh = mkdtempSync(join(tmpdir(), "cumulo-migrate-"));
    try {
      const first = await runCli(["migrate"], { ...env, CUMULO_DATA_DIR: fresh, DATABASE_URL: undefined });
      expect(first.code).toBe(0);
      expect(JSON.parse(first.stdout).applied).toContain("0001-identity");
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  it("prints its version, as the metrics' cumulo_build_info reports it", async () => {
    // An operator in a rolling upgrade checks which version a machine's binary is.
    const result = await runCli(["--version"], env);
    expect([result.code, result.stdout]).toEqual([0, `${API_VERSION}\n`]);
  });

  it("stops with one clear line naming a bad configuration value", async () => {
    const result = await runCli(["orgs", "list"], { ...env, CUMULO_RATE_LIMIT: "lots" });
    expect(result.code).not.toBe(0);
    expect(result.stderr.trim().split("\n")).toHaveLength(1);
    expect(result.stderr).toContain("CUMULO_RATE_LIMIT");
  });

  it("names a store URL it cannot parse without printing its password", async () => {
    // A port out of range makes the whole value unparsable; the error still must not echo the secret.
    for (const [variable, value] of [
      ["DATABASE_URL", "postgres://postgres:S3cretPw@127.0.0.1:99999/cumulo"],
      ["REDIS_URL", "redis://:S3cretPw@127.0.0.1:99999"],
    ] as const) {
      const result = await runCli(["orgs", "list"], { ...env, [variable]: value });
      expect([result.code, result.stdout]).toEqual([1, ""]);
      expect(result.stderr).toContain(variable);
      expect(result.stderr).toContain("127.0.0.1:99999");
      expect(result.stderr).not.toContain("S3cretPw");
    }
  });

  it("stops with one line, not a log of every try, when Redis does not answer", async () => {
    const result = await runCli(
      ["orgs", "list"],
      // Waiting 1 s rather than the default 10 s.
      { ...env, REDIS_URL: "redis://127.0.0.1:1", CUMULO_REDIS_START_TIMEOUT_MS: "1000" },
      undefined,
      30_000,
    );
    expect([result.code, result.stdout]).toEqual([1, ""]);
    expect(result.stderr.trim()).toBe(
      "cumulo: Redis (REDIS_URL) did not answer within 1 s (connect ECONNREFUSED 127.0.0.1:1)",
    );
  });

  it("names a data directory that cannot be made instead of hanging (a path under /proc)", async () => {
    const result = await runCli(
      ["orgs", "list"],
      { ...env, CUMULO_DATA_DIR: "/proc/cumulo-missing/data", DATABASE_URL: undefined },
      undefined,
      20_000,
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("/proc/cumulo-missing");
  });

  it("says a data dir that is a file is not a directory", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cumulo-file-"));
    const file = join(dir, "data");
    writeFileSync(file, "");
    try {
      const result = await runCli(["orgs", "list"], {
        ...env,
        CUMULO_DATA_DIR: file,
        DATABASE_URL: undefined,
      });
      expect([result.code, result.stdout, result.stderr]).toEqual([
        1,
        "",
        `cumulo: cannot open the store (CUMULO_DATA_DIR): ${file} is not a directory\n`,
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("migrates and prints the OpenAPI document", async () => {
    expect((await runCli(["migrate"], env)).code).toBe(0);
    const openapi = await runCli(["openapi"], env);
    expect(openapi.code).toBe(0);
    expect(JSON.parse(openapi.stdout).openapi).toBe("3.1.0");
    // Printing it touches no store: neither a data dir that does not exist yet nor an unreachable
    // database (it created and migrated a store before the QA of 4 December).
    const nowhere = join(mkdtempSync(join(tmpdir(), "cumulo-cli-")), "data");
    try {
      const unreachable = { CUMULO_DATA_DIR: nowhere, DATABASE_URL: "postgres://postgres@127.0.0.1:1/none" };
      const printed = await runCli(["openapi"], unreachable);
      expect([printed.code, printed.stderr]).toEqual([0, ""]);
      expect(JSON.parse(printed.stdout).paths).toEqual(JSON.parse(openapi.stdout).paths);
      // A wrong command line is 2 before any store is opened, whatever the store's state.
      const wrong = await runCli(["keys", "revoke", "abc"], unreachable);
      expect([wrong.code, wrong.stderr.trim()]).toEqual([
        2,
        'cumulo: key id must be a positive integer, got "abc"',
      ]);
      expect(existsSync(nowhere)).toBe(false);
    } finally {
      rmSync(dirname(nowhere), { recursive: true, force: true });
    }

    // `cumulo openapi | head -c 100`: the reader leaving early ended the command with a stack trace.
    const child = spawn(process.execPath, [BIN, "openapi"], {
      env: { ...process.env, CUMULO_LOG_LEVEL: "silent", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    child.stdout.once("data", () => child.stdout.destroy());
    const [code] = (await once(child, "close")) as [number | null];
    expect([code, stderr]).toEqual([0, ""]);
  });
});

// A fresh SQLite data dir of its own; the store kind does not matter to what is printed when.
it.runIf(testStoreKind() === "sqlite")(
  "shows the generated admin key even when the first start fails after storing it",
  { timeout: 120_000 },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), "cumulo-first-start-"));
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = taken.address() as AddressInfo;
      const failed = await runCli(["serve"], {
        CUMULO_DATA_DIR: join(dir, "data"),
        PORT: String(port),
        HOST: "127.0.0.1",
        CUMULO_EDGE_PORT: "off",
        CUMULO_BOOTSTRAP_API_KEY: undefined,
        DATABASE_URL: undefined,
        REDIS_URL: undefined,
      });
      expect(failed.code).not.toBe(0);
      // The store now holds the organization and its key: a later start makes none and shows none.
      const key = /^ {4}(cmk_\S+)$/m.exec(failed.stdout)?.[1];
      expect(key, failed.stdout + failed.stderr).toMatch(/^cmk_[A-Za-z0-9_-]{43}$/);
      const store = { CUMULO_DATA_DIR: join(dir, "data"), DATABASE_URL: undefined };
      const [organization] = JSON.parse((await runCli(["orgs", "list"], store)).stdout);
      const keys = await runCli(["keys", "list", "--org", organization.id], store);
      expect(keys.code, keys.stderr).toBe(0);
      expect(JSON.parse(keys.stdout)).toHaveLength(1);
    } finally {
      taken.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
