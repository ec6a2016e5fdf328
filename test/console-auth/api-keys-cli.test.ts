import { spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { BLANK_TEXTS, blankError } from "../support/blank-text.ts";
import { BIN, runCli } from "../support/cli.ts";
import {
  adminOrganizationId,
  createConsoleUser,
  PASSWORD,
  type SignedIn,
  signIn,
  withSession,
} from "../support/console.ts";

describe("organization API keys from the console", () => {
  let t: TestApp;
  let admin: SignedIn;
  let reader: SignedIn;
  beforeAll(async () => {
    t = await startTestApp();
    await createConsoleUser(t, { email: "keys@example.test" });
    await createConsoleUser(t, { email: "keys-reader@example.test", readOnly: true });
    admin = await signIn(t, "keys@example.test");
    reader = await signIn(t, "keys-reader@example.test");
  });
  afterAll(() => t.close());

  it("creates a key whose secret is shown once and works at once; lists never show secrets", async () => {
    const created = await t.request("POST", "/v1/organization/api-keys", {
      ...withSession(admin),
      json: { name: "deploy", read_only: true },
    });
    expect(created.status).toBe(201);
    const key = created.body.data;
    expect(Object.keys(key).sort()).toEqual(["api_key", "created_at", "id", "name", "prefix", "read_only"]);
    expect(key).toMatchObject({ name: "deploy", read_only: true });
    expect(key.api_key.startsWith(key.prefix)).toBe(true);

    const before = await t.request("GET", "/v1/organization/api-keys", withSession(admin, false));
    const listed = before.body.data.find((item: { id: number }) => item.id === key.id);
    expect(listed).toEqual({
      id: key.id,
      name: "deploy",
      prefix: key.prefix,
      read_only: true,
      created_at: key.created_at,
      last_used_at: null,
    });
    expect(before.text).not.toContain(key.api_key);

    // Usable against the API, as a read-only key.
    expect((await t.request("GET", "/v1/media/libraries", { key: key.api_key })).status).toBe(200);
    expect(
      (await t.request("POST", "/v1/media/libraries", { key: key.api_key, json: { name: "x" } })).status,
    ).toBe(403);
    const after = await t.request("GET", "/v1/organization/api-keys", withSession(reader, false));
    expect(after.body.data.find((item: { id: number }) => item.id === key.id).last_used_at).toMatch(
      /^\d{4}-/,
    );
  });

  it("revokes a key: 401 from the next request; revoking again is 404", async () => {
    const key = (
      await t.request("POST", "/v1/organization/api-keys", {
        ...withSession(admin),
        json: { name: "temporary" },
      })
    ).body.data;
    expect((await t.request("GET", "/v1/media/libraries", { key: key.api_key })).status).toBe(200);
    const revoked = await t.request("DELETE", `/v1/organization/api-keys/${key.id}`, withSession(admin));
    expect(revoked.status).toBe(204);
    expect((await t.request("GET", "/v1/media/libraries", { key: key.api_key })).status).toBe(401);
    const list = await t.request("GET", "/v1/organization/api-keys", withSession(admin, false));
    expect(list.body.data.map((item: { id: number }) => item.id)).not.toContain(key.id);
    expect(
      (await t.request("DELETE", `/v1/organization/api-keys/${key.id}`, withSession(admin))).status,
    ).toBe(404);
    expect((await t.request("DELETE", "/v1/organization/api-keys/abc", withSession(admin))).status).toBe(404);
  });

  it("takes a key id only as decimal text: its hexadecimal form is not found and revokes nothing", async () => {
    const key = (
      await t.request("POST", "/v1/organization/api-keys", { ...withSession(admin), json: { name: "hex" } })
    ).body.data;
    const hex = `0x${key.id.toString(16)}`;
    expect((await t.request("DELETE", `/v1/organization/api-keys/${hex}`, withSession(admin))).status).toBe(
      404,
    );
    expect((await t.request("GET", "/v1/media/libraries", { key: key.api_key })).status).toBe(200);
  });

  it("lets a read-only user list keys but neither create nor revoke them", async () => {
    expect((await t.request("GET", "/v1/organization/api-keys", withSession(reader, false))).status).toBe(
      200,
    );
    const create = await t.request("POST", "/v1/organization/api-keys", {
      ...withSession(reader),
      json: { name: "no" },
    });
    expect(create.status).toBe(403);
    expect(create.body).toMatchObject({ success: false, error: "forbidden" });
    const key = (await t.request("POST", "/v1/organization/api-keys", { json: { name: "kept" } })).body.data;
    const revoke = await t.request("DELETE", `/v1/organization/api-keys/${key.id}`, withSession(reader));
    expect(revoke.status).toBe(403);
    expect((await t.request("GET", "/v1/media/libraries", { key: key.api_key })).status).toBe(200);
  });

  it("lets a restricted cloud token list keys but neither create nor revoke them", async () => {
    const token = (
      await t.cloud("POST", "/v1/user-resource/token", { json: { description: "r", restricted: true } })
    ).body[0].token as string;
    expect((await t.request("GET", "/v1/organization/api-keys", { key: token })).status).toBe(200);
    const create = await t.request("POST", "/v1/organization/api-keys", {
      key: token,
      json: { name: "escalated" },
    });
    expect(create.status).toBe(403);
    expect(create.body).toMatchObject({ success: false, error: "forbidden" });
    const key = (await t.request("POST", "/v1/organization/api-keys", { json: { name: "admin" } })).body.data;
    const revoke = await t.request("DELETE", `/v1/organization/api-keys/${key.id}`, { key: token });
    expect(revoke.status).toBe(403);
    expect((await t.request("GET", "/v1/media/libraries", { key: key.api_key })).status).toBe(200);
  });

  it("validates the name", async () => {
    const response = await t.request("POST", "/v1/organization/api-keys", {
      ...withSession(admin),
      json: { name: "" },
    });
    expect(response.status).toBe(400);
    expect(response.body.errors[0].field).toBe("name");
    for (const name of BLANK_TEXTS) {
      const blank = await t.request("POST", "/v1/organization/api-keys", {
        ...withSession(admin),
        json: { name },
      });
      expect(blank.status).toBe(400);
      expect(blank.body.errors).toEqual([blankError("name")]);
    }
  });
});

// Each case runs the real binary several times (each start compiling TypeScript), so the bound is wider.
describe("cumulo users", { timeout: 240_000 }, () => {
  let t: TestApp;
  let env: Record<string, string | undefined>;
  let org: string;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_PUBLIC_URL: "https://cumulo.example.invalid" });
    env = {
      CUMULO_DATA_DIR: t.store.dataDir,
      DATABASE_URL: t.store.databaseUrl,
      CUMULO_PUBLIC_URL: "https://cumulo.example.invalid",
    };
    org = await adminOrganizationId(t);
  });
  afterAll(() => t.close());

  it("creates a user with the password piped on stdin, who can sign in on the running server", async () => {
    const result = await runCli(
      ["users", "create", "--org", org, "--email", "Cli@Example.test"],
      env,
      `${PASSWORD}\n`,
    );
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const user = JSON.parse(result.stdout);
    expect(user).toMatchObject({
      email: "cli@example.test",
      read_only: false,
      status: "active",
      organization_id: org,
    });
    expect(result.stdout).not.toContain(PASSWORD);
    const session = await signIn(t, "cli@example.test");
    expect(session.session.user.id).toBe(user.id);
  });

  it("prints a one-time invitation link when no password is piped; read-only users are read-only", async () => {
    const result = await runCli(
      ["users", "create", "--org", org, "--email", "invited@example.test", "--read-only"],
      env,
    );
    expect(result.code).toBe(0);
    const user = JSON.parse(result.stdout);
    expect(user).toMatchObject({ status: "invited", read_only: true });
    expect(user.invitation_url).toMatch(/^https:\/\/cumulo\.example\.invalid\/console\/invite#[\w-]{43}$/);
    const accepted = await t.request("POST", "/v1/console/invitations/accept", {
      anonymous: true,
      json: { token: user.invitation_url.split("#")[1], password: PASSWORD },
    });
    expect(accepted.status).toBe(201);
    expect(accepted.body.data.user.read_only).toBe(true);
  });

  it("refuses a taken email, a bad email, a short password and an unknown organization", async () => {
    const taken = await runCli(
      ["users", "create", "--org", org, "--email", "CLI@example.test"],
      env,
      PASSWORD,
    );
    expect(taken.code).toBe(1);
    expect(taken.stderr).toBe("cumulo: a user with email cli@example.test already exists\n");
    const bad = await runCli(["users", "create", "--org", org, "--email", "not-an-email"], env, PASSWORD);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--email: Must be an email address");
    const short = await runCli(
      ["users", "create", "--org", org, "--email", "s@example.test"],
      env,
      "short\n",
    );
    expect(short.code).toBe(1);
    expect(short.stderr).toContain("password (stdin): Must be at least 10 characters");
    // More than one line piped (a file, or the rest of a script's `while read` input) is a mistake,
    // not a password anyone could type at the sign-in form.
    const lines = await runCli(
      ["users", "create", "--org", org, "--email", "lines@example.test"],
      env,
      `${PASSWORD}\nsecond-line\n`,
    );
    expect([lines.code, lines.stdout, lines.stderr]).toEqual([
      1,
      "",
      "cumulo: password (stdin) must be one line, got 2\n",
    ]);
    expect(lines.stderr).not.toContain(PASSWORD);
    // An empty line, or an empty file given as the password: before, an invited user was made.
    const emptied =
      "cumulo: password (stdin) is empty: give one line of 10-200 characters, or no stdin for an invitation link\n";
    const emptyLine = await runCli(
      ["users", "create", "--org", org, "--email", "empty@example.test"],
      env,
      "\n",
    );
    expect([emptyLine.code, emptyLine.stdout, emptyLine.stderr]).toEqual([1, "", emptied]);
    const emptyFile = join(mkdtempSync(join(tmpdir(), "cumulo-password-")), "password.txt");
    writeFileSync(emptyFile, "");
    const emptyFd = openSync(emptyFile, "r");
    const fromFile = spawnSync(
      process.execPath,
      [BIN, "users", "create", "--org", org, "--email", "empty@example.test"],
      {
        env: { ...process.env, CUMULO_LOG_LEVEL: "silent", ...env },
        stdio: [emptyFd, "pipe", "pipe"],
        encoding: "utf8",
      },
    );
    closeSync(emptyFd);
    rmSync(dirname(emptyFile), { recursive: true, force: true });
    expect([fromFile.status, fromFile.stdout, fromFile.stderr]).toEqual([1, "", emptied]);
    const unknown = await runCli(
      ["users", "create", "--org", "5b0c9a1e-8d3f-4c2a-9e71-3f5d2b8c4a10", "--email", "u@example.test"],
      env,
      PASSWORD,
    );
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("not found");
  });

  it("lists the organization's users and removes one, ending their sessions", async () => {
    const listed = JSON.parse((await runCli(["users", "list", "--org", org], env)).stdout);
    const cli = listed.find((user: { email: string }) => user.email === "cli@example.test");
    expect(cli).toMatchObject({ status: "active", read_only: false });
    expect(listed.map((user: { email: string }) => user.email)).toContain("invited@example.test");
    // The organization's built-in user (owner of its keys) is not a console user.
    expect(listed.every((user: { email: string }) => user.email !== "")).toBe(true);
    expect(JSON.stringify(listed)).not.toContain("scrypt");

    const session = await signIn(t, "cli@example.test");
    expect((await t.request("GET", "/v1/media/libraries", withSession(session, false))).status).toBe(200);
    const removed = await runCli(["users", "remove", String(cli.id)], env);
    expect(removed.code).toBe(0);
    expect(JSON.parse(removed.stdout)).toEqual({ id: cli.id, removed: true });
    expect((await t.request("GET", "/v1/media/libraries", withSession(session, false))).status).toBe(401);
    const again = await runCli(["users", "remove", String(cli.id)], env);
    expect(again.code).toBe(1);
    expect((await runCli(["users", "remove", "abc"], env)).stderr).toContain(
      "user id must be a positive integer",
    );
    // The API keys of the organization still work.
    expect((await t.request("GET", "/v1/media/libraries")).status).toBe(200);
  });
});
