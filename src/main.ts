import { Command, Option } from "commander";
import { buildApp } from "./app.ts";
import { type Config, ConfigError, loadConfig } from "./config.ts";
import { DEV_MODE_OFFERS } from "./devmode/routes.ts";
import { createStateService, SNAPSHOT_NAME } from "./devmode/state-service.ts";
import { isUuid } from "./ids.ts";
import { backup, restore } from "./ops/backup.ts";
import { closeCore, openCore, startCumulo } from "./roles.ts";
import { type CoreDeps, createServices } from "./services.ts";

const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
};

class CliError extends Error {}

/** An organization id is a UUID; checked here so both stores answer the same clear error. */
function organizationId(org: string): string {
  if (!isUuid(org)) throw new CliError(`--org must be an organization id (UUID), got "${org}"`);
  return org;
}

/** Key and user ids are positive 32-bit integers in both stores. */
function positiveId(value: string, what: string): number {
  if (!/^\d{1,10}$/.test(value) || Number(value) < 1 || Number(value) > 2_147_483_647) {
    throw new CliError(`${what} must be a positive integer, got "${value}"`);
  }
  return Number(value);
}

/** Runs `work` against the configured store, closing it afterwards. */
async function withServices<T>(
  work: (services: ReturnType<typeof createServices>, deps: CoreDeps) => Promise<T>,
): Promise<T> {
  const config = loadConfig();
  const deps = await openCore({ ...config, logLevel: "silent" });
  try {
    return await work(createServices(deps), deps);
  } finally {
    await closeCore(deps);
  }
}

async function serve(config: Config): Promise<void> {
  const running = await startCumulo(config);
  if (running.generatedKey) {
    process.stdout.write(
      [
        "",
        "Cumulo created the default organization. Its admin API key is shown this once:",
        "",
        `    ${running.generatedKey}`,
        "",
        `Try: curl -H "Authorization: Bearer ${running.generatedKey}" ${running.apiUrl ?? ""}/v1/livestream/health`,
        "",
      ].join("\n"),
    );
  }
  if (running.apiUrl)
    process.stdout.write(`Cumulo API listening on ${running.apiUrl} (docs at ${running.apiUrl}/docs)\n`);
  if (running.edgeUrl) process.stdout.write(`Cumulo CDN edge listening on ${running.edgeUrl}\n`);
  if (config.devMode) {
    process.stdout.write(
      `Developer mode is on (docs/dev-mode.md); with an admin key of the default organization:\n${DEV_MODE_OFFERS.map((line) => `  ${line}\n`).join("")}`,
    );
  }
  process.stdout.write(`Cumulo ready (roles: ${config.roles.join(", ")})\n`);
  const shutdown = (signal: string) => {
    process.stdout.write(`${signal} received, shutting down\n`);
    running.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`shutdown failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.once("SIGTERM", () => shutdown("SIGTERM"));
  process.once("SIGINT", () => shutdown("SIGINT"));
}

export function buildCli(): Command {
  const program = new Command("cumulo").description("Cumulo platform API").showHelpAfterError();

  program
    .command("serve", { isDefault: true })
    .description("start the roles in CUMULO_ROLES (default: api, worker and edge)")
    .action(() => serve(loadConfig()));

  program
    .command("dev")
    .description("start like serve, with developer mode on (state, snapshots, time, faults under /_cumulo/)")
    .action(() => serve({ ...loadConfig(), devMode: true }));

  const state = program
    .command("state")
    .description(
      "developer mode: reset, save or load the store and blobs (stop the server first, or use Redis)",
    );
  const snapshotName = (name: string) => {
    if (!new RegExp(SNAPSHOT_NAME).test(name)) {
      throw new CliError(`snapshot name must be 1-40 characters from [a-z0-9_], got "${name}"`);
    }
    return name;
  };
  state
    .command("save <name>")
    .description("save the store and blobs as a named snapshot")
    .action((name: string) =>
      withServices(async (services, deps) =>
        print((await createStateService(deps, services.identity).save(snapshotName(name))).snapshot),
      ),
    );
  state
    .command("load <name>")
    .description("replace the store and blobs with a snapshot")
    .action((name: string) =>
      withServices(async (services, deps) => {
        const loaded = await createStateService(deps, services.identity).load(snapshotName(name));
        switch (loaded.outcome) {
          case "loaded":
            return print({ loaded: name });
          case "not_found":
            throw new CliError(`snapshot ${name} not found`);
          case "schema_mismatch":
            throw new CliError(`snapshot ${name} was saved at another schema version`);
        }
      }),
    );
  state
    .command("reset")
    .addOption(
      new Option("--to <target>", "bootstrap: keep the default organization")
        .choices(["bootstrap", "empty"])
        .default("bootstrap"),
    )
    .description("empty the store and blobs")
    .action(({ to }: { to: "bootstrap" | "empty" }) =>
      withServices(async (services, deps) => {
        const { generatedKey } = await createStateService(deps, services.identity).reset(to);
        print({ reset: to, ...(generatedKey ? { generated_key: generatedKey } : {}) });
      }),
    );

  program
    .command("migrate")
    .description("bring the store up to the latest schema")
    .action(() => withServices(async () => print({ migrated: true })));

  program
    .command("openapi")
    .description("print the OpenAPI document")
    .action(async () => {
      const config = { ...loadConfig(), logLevel: "silent" };
      const deps = await openCore(config);
      try {
        const app = await buildApp(deps, createServices(deps));
        await app.ready();
        print(app.swagger());
        await app.close();
      } finally {
        await closeCore(deps);
      }
    });

  program
    .command("backup")
    .requiredOption("--to <dir>", "an empty or new directory for the backup")
    .description("back up the SQLite store, the blobs and the secret key file while the server runs")
    .action(async ({ to }: { to: string }) => {
      const result = await backup(loadConfig(), to);
      switch (result.outcome) {
        case "backed_up":
          return print(result.manifest);
        case "postgres":
          throw new CliError(
            "DATABASE_URL is set: back up PostgreSQL with pg_dump and copy the blobs (docs/operations.md, Backups)",
          );
        case "target_not_empty":
          throw new CliError(`--to ${to} is not empty; give a new or empty directory`);
        case "no_database":
          throw new CliError("no store to back up in CUMULO_DATA_DIR (cumulo.sqlite not found)");
      }
    });

  program
    .command("restore")
    .requiredOption("--from <dir>", "a directory written by cumulo backup")
    .description("restore a backup into an empty CUMULO_DATA_DIR (SQLite); start the server afterwards")
    .action(async ({ from }: { from: string }) => {
      const config = loadConfig();
      const result = await restore(config, from);
      switch (result.outcome) {
        case "restored":
          return print({ restored: from, data_dir: config.dataDir, ...result.manifest });
        case "postgres":
          throw new CliError(
            "DATABASE_URL is set: restore PostgreSQL with pg_restore and copy the blobs (docs/operations.md, Backups)",
          );
        case "data_dir_not_empty":
          throw new CliError(
            `CUMULO_DATA_DIR ${config.dataDir} is not empty; restore only into an empty data dir`,
          );
        case "not_a_backup":
          throw new CliError(`--from ${from} is not a complete backup (no manifest.json or cumulo.sqlite)`);
      }
    });

  const orgs = program.command("orgs").description("organizations");
  orgs
    .command("create")
    .requiredOption("--name <name>", "organization name")
    .description("create an organization with its first user, billing account and admin key")
    .action(({ name }: { name: string }) =>
      withServices(async (services) => {
        if (name.trim() === "") throw new CliError("--name must not be empty");
        print(await services.identity.createOrganization(name.trim()));
      }),
    );
  orgs
    .command("list")
    .description("list organizations")
    .action(() => withServices(async (services) => print(await services.identity.listOrganizations())));

  const keys = program.command("keys").description("organization API keys");
  keys
    .command("create")
    .requiredOption("--org <id>", "organization id")
    .option("--name <name>", "key name", "api key")
    .addOption(new Option("--read-only", "key may only read").default(false))
    .description("create an API key (the secret is printed once)")
    .action(({ org, name, readOnly }: { org: string; name: string; readOnly: boolean }) =>
      withServices(async (services) => {
        const result = await services.identity.createApiKey(organizationId(org), { name, readOnly });
        if (result.outcome === "organization_not_found") throw new CliError(`organization ${org} not found`);
        print({ id: result.id, prefix: result.prefix, api_key: result.api_key });
      }),
    );
  keys
    .command("list")
    .requiredOption("--org <id>", "organization id")
    .description("list API keys (no secrets)")
    .action(({ org }: { org: string }) =>
      withServices(async (services) => {
        const list = await services.identity.listApiKeys(organizationId(org));
        if (!list) throw new CliError(`organization ${org} not found`);
        print(list);
      }),
    );
  keys
    .command("revoke <keyId>")
    .description("revoke an API key; it stops working at once")
    .action((keyId: string) =>
      withServices(async (services) => {
        if ((await services.identity.revokeApiKey(positiveId(keyId, "key id"))).outcome === "not_found") {
          throw new CliError(`key ${keyId} not found or already revoked`);
        }
        print({ id: Number(keyId), revoked: true });
      }),
    );

  const users = program.command("users").description("console users (people who sign in at /console)");
  users
    .command("create")
    .requiredOption("--org <id>", "organization id")
    .requiredOption("--email <email>", "the email the user signs in with")
    .addOption(new Option("--read-only", "the user may look at everything and change nothing").default(false))
    .description(
      "create a console user: the password is read from stdin when piped, else a one-time invitation link is printed",
    )
    .action(({ org, email, readOnly }: { org: string; email: string; readOnly: boolean }) =>
      withServices(async (services) => {
        const password = await passwordFromStdin();
        const result = await services.console.createUser({
          organizationId: organizationId(org),
          email,
          readOnly,
          ...(password === undefined ? {} : { password }),
        });
        switch (result.outcome) {
          case "created":
            return print({
              ...result.user,
              ...(result.invitation_url
                ? {
                    invitation_url: result.invitation_url,
                    invitation_expires_at: result.invitation_expires_at,
                  }
                : {}),
            });
          case "organization_not_found":
            throw new CliError(`organization ${org} not found`);
          case "email_taken":
            throw new CliError(`a user with email ${email.trim().toLowerCase()} already exists`);
          case "invalid":
            throw new CliError(
              result.errors
                .map(
                  (error) => `${error.field === "email" ? "--email" : "password (stdin)"}: ${error.message}`,
                )
                .join("; "),
            );
        }
      }),
    );
  users
    .command("list")
    .requiredOption("--org <id>", "organization id")
    .description("list the organization's console users")
    .action(({ org }: { org: string }) =>
      withServices(async (services) => {
        const list = await services.console.listUsers(organizationId(org));
        if (!list) throw new CliError(`organization ${org} not found`);
        print(list);
      }),
    );
  users
    .command("remove <userId>")
    .description("remove a console user; their sessions end at once")
    .action((userId: string) =>
      withServices(async (services) => {
        if ((await services.console.removeUser(positiveId(userId, "user id"))).outcome === "not_found") {
          throw new CliError(`console user ${userId} not found`);
        }
        print({ id: Number(userId), removed: true });
      }),
    );

  return program;
}

/**
 * The password piped to `users create` (one line; the final line break is not part of it), or
 * undefined when stdin is a terminal or empty: then the user gets an invitation link instead.
 */
async function passwordFromStdin(): Promise<string | undefined> {
  if (process.stdin.isTTY) return undefined;
  let text = "";
  for await (const chunk of process.stdin) text += String(chunk);
  const password = text.replace(/\r?\n$/, "");
  return password === "" ? undefined : password;
}

export async function main(argv: string[]): Promise<void> {
  try {
    await buildCli().parseAsync(argv);
  } catch (error) {
    const known = error instanceof CliError || error instanceof ConfigError;
    process.stderr.write(
      `cumulo: ${known ? error.message : error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(1);
  }
}
