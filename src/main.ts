import { fstatSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command, CommanderError, Option } from "commander";
import { type Config, ConfigError, loadConfig, runningRoles, settingsNotRead } from "./config.ts";
import type { SeedBody, SeedOutcome } from "./devmode/seed.ts";
import type { StateService } from "./devmode/state-service.ts";
import { createPrivately, openToOthers } from "./directories.ts";
import type { IdentityServices } from "./identity/index.ts";
import { API_KEY_NAME_MAX, ORGANIZATION_NAME_MAX } from "./identity/keys.ts";
import { isUuid } from "./ids.ts";
import type { CoreDeps, Services } from "./services.ts";
import { hasControlCharacter, isBlank, NAME_FORMAT } from "./text.ts";
import { API_VERSION } from "./version.ts";

// Each command imports what it runs when it runs: a store command (`cumulo keys revoke`, `cumulo
// state reset`) then loads neither the HTTP app nor its routes, which CI scripts paid on every call
// (docs/performance.md, session 11).

const print = (value: unknown): void => {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
};

/** The command could not be carried out (not found, store unreachable, refused): exit status 1. */
class CliError extends Error {}

/**
 * The command line itself is wrong, as commander's own errors (unknown command or option, missing
 * argument, a choice not offered): a value of the wrong form, judged from the line alone. Exit
 * status 2, the common convention, so a script tells a mistake in its call from a failure to run it.
 */
class UsageError extends CliError {}

const RUNTIME_ERROR = 1;
const USAGE_ERROR = 2;
const EXIT_STATUS_HELP = `
Exit status: 0 on success; ${RUNTIME_ERROR} when the command could not be carried out (not found, refused,
the store unreachable); ${USAGE_ERROR} when the command line is wrong (an unknown command or option, a
missing or malformed value).`;

/**
 * An organization id is a UUID; checked here so both stores answer the same clear error, and in
 * lower case as stored (SQLite compares text, PostgreSQL's uuid type would take capitals).
 */
function organizationId(org: string): string {
  if (!isUuid(org)) throw new UsageError(`--org must be an organization id (UUID), got "${org}"`);
  return org.toLowerCase();
}

/** A name given with `--name`: 1 to `most` characters, not only white space, on one line, as the API takes it. */
function nameOption(name: string, most: number): string {
  if (name.length < 1 || name.length > most) {
    throw new UsageError(`--name must be 1-${most} characters, got ${name.length}`);
  }
  if (isBlank(name)) throw new UsageError("--name must not be only white space");
  if (hasControlCharacter(name)) throw new UsageError(`--name must be ${NAME_FORMAT}`);
  return name;
}

/** Key and user ids are positive 32-bit integers in both stores. */
function positiveId(value: string, what: string): number {
  if (!/^\d{1,10}$/.test(value) || Number(value) < 1 || Number(value) > 2_147_483_647) {
    throw new UsageError(`${what} must be a positive integer, got "${value}"`);
  }
  return Number(value);
}

/**
 * Runs `work` with what `build` (loaded when needed) makes of the configured store, closing it
 * afterwards. A store made now (every migration applied) is noted on stderr unless the caller follows
 * the migrations itself with `onMigrated` (`migrate`, and `openapi` on its scratch store).
 */
async function withCore<S, T>(
  loadBuild: () => Promise<(deps: CoreDeps) => S>,
  work: (services: S, deps: CoreDeps) => Promise<T>,
  onMigrated?: (names: string[]) => void,
  config: Config = loadConfig(),
): Promise<T> {
  const [{ openCore, closeCore }, { madeNewStore }, build] = await Promise.all([
    import("./core.ts"),
    import("./store/migrations/index.ts"),
    loadBuild(),
  ]);
  let applied: string[] = [];
  const deps = await openCore(
    { ...config, logLevel: "silent" },
    {
      onMigrationWait: (message) => process.stderr.write(`cumulo: ${message}\n`),
      onMigrated: (names) => {
        applied = names;
        onMigrated?.(names);
      },
    },
  );
  // Every migration just applied: the store was made now. A mistyped data dir or URL otherwise shows
  // only as data missing: a revocation "not found", the leaked key valid on the server (QA of 6 December).
  if (!onMigrated && madeNewStore(applied)) {
    const where = config.databaseUrl
      ? "DATABASE_URL names a database that held no Cumulo store"
      : `CUMULO_DATA_DIR (${config.dataDir}) held no Cumulo store`;
    process.stderr.write(
      `cumulo: note: ${where}; a new, empty one was made there. If you meant a server's store, check that setting.\n`,
    );
  }
  try {
    return await work(build(deps), deps);
  } finally {
    await closeCore(deps);
  }
}

/** Every service, for the commands that may touch any domain. */
const withServices = <T>(work: (services: Services, deps: CoreDeps) => Promise<T>): Promise<T> =>
  withCore(async () => (await import("./services.ts")).createServices, work);

/** Only organizations, keys and users: the key and user commands load none of the other domains. */
const withIdentity = <T>(work: (services: IdentityServices) => Promise<T>): Promise<T> =>
  withCore(async () => (await import("./identity/index.ts")).createIdentityServices, work);

/** `withServices` with developer mode's state service (reset, snapshots, seeding). */
function withState<T>(
  work: (state: StateService, services: Services, deps: CoreDeps) => Promise<T>,
): Promise<T> {
  return withServices(async (services, deps) => {
    const { createStateService } = await import("./devmode/state-service.ts");
    return work(createStateService(deps, services), services, deps);
  });
}

const filesInBucketMessage = async () => (await import("./devmode/state-service.ts")).FILES_IN_BUCKET_MESSAGE;

/** A seed file (JSON or YAML by its extension), read and checked against the seed's schema. */
async function seedFile(file: string): Promise<SeedBody> {
  const text = await readFile(file, "utf8").catch((error: Error) => {
    throw new CliError(`cannot read ${file}: ${error.message}`);
  });
  const { readSeedFile } = await import("./devmode/seed.ts");
  const read = readSeedFile(file, text);
  if ("problem" in read) throw new CliError(read.problem);
  return read.seed;
}

function seeded(outcome: SeedOutcome): unknown {
  if (outcome.outcome === "failed") {
    throw new CliError(
      `seeding stopped at ${outcome.step}: ${outcome.status} ${JSON.stringify(outcome.answer)} (nothing was added)`,
    );
  }
  return { organizations: outcome.organizations };
}

/**
 * Links built from a wildcard HOST name an address no other machine can open: what to set, when the
 * settings that would name reachable ones are missing (docs/operations.md).
 */
function unreachableLinks(config: Config): string | undefined {
  if (!["0.0.0.0", "::", "[::]"].includes(config.host) || !config.roles.includes("api")) return undefined;
  const missing = [
    ...(config.edgePublicUrl === undefined && config.edgeUrlStyle === "path"
      ? ["CUMULO_EDGE_PUBLIC_URL (playback URLs)"]
      : []),
    ...(config.publicUrl === undefined ? ["CUMULO_PUBLIC_URL (console invitation links)"] : []),
  ];
  if (missing.length === 0) return undefined;
  return `HOST is ${config.host}, so links would name that address, which other machines cannot open: set ${missing.join(" and ")} to the address people reach`;
}

/**
 * A data dir other accounts of the host may read (made by the operator or an older Cumulo, or opened
 * since) holds the store and private videos: warned of, never changed, since an operator may share
 * it on purpose (then CUMULO_DATA_DIR_MODE=inherit says so).
 */
function dataDirOpenToOthers(config: Config): string | undefined {
  if (config.dataDirMode !== "private" || !openToOthers(config.dataDir)) return undefined;
  return `the data dir ${config.dataDir} can be read by other accounts of this host, and with it the store and private videos: chmod 700 ${config.dataDir} (or set CUMULO_DATA_DIR_MODE=inherit if it is shared on purpose)`;
}

/** Fewer characters than `openssl rand -hex 16` gives: guessable offline (docs/decisions.md, Start-up). */
const SECRET_KEY_MIN_LENGTH = 32;

/** Settings given under a name Cumulo does not read, which would otherwise be ignored without a word. */
function settingsIgnored(): string | undefined {
  const ignored = settingsNotRead();
  if (ignored.length === 0) return undefined;
  const names = ignored.map(({ name, meant }) => (meant ? `${name} (did you mean ${meant}?)` : name));
  return `${names.join(", ")} ${ignored.length === 1 ? "is" : "are"} set but no setting of this node reads ${ignored.length === 1 ? "it" : "them"}: a misspelled name, or one that counts only with another setting (README.md, Configuration)`;
}

/**
 * A short `CUMULO_SECRET_KEY` can be found by trying keys against a playback token or upload
 * authorization, which viewers and browsers hold. Warned of, not refused: changing the key of a
 * running installation makes its stored secrets unreadable.
 */
function weakSecretKey(config: Config): string | undefined {
  const length = config.secretKey?.length;
  if (length === undefined || length >= SECRET_KEY_MIN_LENGTH) return undefined;
  return `CUMULO_SECRET_KEY has ${length} characters: it signs the playback tokens and upload authorizations that viewers and browsers hold, and a key this short can be guessed from one; a new installation should use ${SECRET_KEY_MIN_LENGTH} or more random characters (openssl rand -hex 32)`;
}

/**
 * A node of a split deployment (PostgreSQL, the API or the worker role elsewhere) keeping media files
 * on its own disk: uploads it takes never reach the workers, whose videos then fail with a bare
 * ENOENT (QA of 6 December). Warned of, not refused: the nodes' data dirs may be one shared folder.
 */
function localMediaOnSplitNode(config: Config, roles: readonly string[]): string | undefined {
  if (config.blobStore.kind !== "local" || !config.databaseUrl) return undefined;
  if (roles.includes("api") && roles.includes("worker")) return undefined;
  return `this node runs ${roles.join(", ")} only, with media files in its own data dir (${join(config.dataDir, "blobs")}): the nodes running the other roles cannot read the files it writes, nor it theirs (uploaded videos then fail on the workers); set CUMULO_BLOB_STORE=s3 and the same CUMULO_S3_* on every node, unless every node's CUMULO_DATA_DIR is one shared folder`;
}

/** A URL's server and path, without its credentials or query (which may carry a password). */
const whereUrl = (url: string): string => {
  const { host, pathname } = new URL(url);
  return `${host}${pathname === "/" ? "" : pathname}`;
};

/**
 * What the node runs on, for an operator reading its output: which store, media storage and Redis
 * (a node pointed at the wrong database otherwise shows it only by the data it lacks). Never a
 * credential: URLs are reduced to their server and path.
 */
function runsOn(config: Config, roles: readonly string[], schema: string): string {
  const { blobStore } = config;
  const parts = [
    config.databaseUrl
      ? `store PostgreSQL at ${whereUrl(config.databaseUrl)}`
      : `store SQLite at ${join(config.dataDir, "cumulo.sqlite")}`,
    blobStore.kind === "s3"
      ? `media files in S3 bucket ${blobStore.bucket}${blobStore.endpoint ? ` at ${whereUrl(blobStore.endpoint)}` : ` (${blobStore.region})`}`
      : `media files in ${join(config.dataDir, "blobs")}`,
    config.redisUrl ? `Redis at ${whereUrl(config.redisUrl)} (prefix ${config.redisPrefix})` : "no Redis",
    `data dir ${config.dataDir}`,
  ];
  return `Cumulo ${API_VERSION} (schema ${schema}; roles: ${roles.join(", ")}): ${parts.join(", ")}`;
}

async function serve(config: Config, seed?: SeedBody): Promise<void> {
  const { startCumulo } = await import("./roles.ts");
  // Shown as soon as it is stored: a start that fails afterwards (a port in use) must not lose it.
  const showKey = (key: string) =>
    process.stdout.write(
      [
        "",
        "Cumulo created the default organization. Its admin API key is shown this once:",
        "",
        `    ${key}`,
        "",
      ].join("\n"),
    );
  let applied: string[] = [];
  const running = await startCumulo(config, {
    onGeneratedKey: showKey,
    onMigrated: (names) => {
      applied = names;
    },
  });
  if (running.generatedKey && running.apiUrl) {
    process.stdout.write(
      // The secret itself is printed once only (CONTRACT.md section 2), so the hint names it, not repeats it.
      `Try: curl -H "Authorization: Bearer <the key above>" ${running.apiUrl}/v1/livestream/health\n\n`,
    );
  }
  const roles = runningRoles(config);
  for (const warning of [
    settingsIgnored(),
    unreachableLinks(config),
    weakSecretKey(config),
    dataDirOpenToOthers(config),
    localMediaOnSplitNode(config, roles),
  ]) {
    if (warning) process.stderr.write(`cumulo: warning: ${warning}\n`);
  }
  const { latestMigration, madeNewStore } = await import("./store/migrations/index.ts");
  process.stdout.write(`${runsOn(config, roles, latestMigration())}\n`);
  // An upgrade's migrations ran before anything else: the operator's record that they did.
  if (applied.length > 0) {
    const what = madeNewStore(applied)
      ? `a new store, all ${applied.length} migrations applied`
      : `applied ${applied.join(", ")}`;
    process.stdout.write(`Store migrated: ${what}\n`);
  }
  if (running.apiUrl)
    process.stdout.write(`Cumulo API listening on ${running.apiUrl} (docs at ${running.apiUrl}/docs)\n`);
  if (running.edgeUrl) process.stdout.write(`Cumulo CDN edge listening on ${running.edgeUrl}\n`);
  if (running.metricsUrl) process.stdout.write(`Cumulo metrics listening on ${running.metricsUrl}/metrics\n`);
  if (config.devMode) {
    const { DEV_MODE_OFFERS } = await import("./devmode/routes.ts");
    process.stdout.write(
      `Developer mode is on (docs/dev-mode.md); with an admin key of the default organization:\n${DEV_MODE_OFFERS.map((line) => `  ${line}\n`).join("")}`,
    );
  }
  if (seed) {
    if (!running.app?.devSeed) throw new CliError("--seed needs the api role");
    print(seeded(await running.app.devSeed(seed)));
  }
  const shutdown = (signal: string) => {
    process.stdout.write(`${signal} received, shutting down\n`);
    running.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`cumulo: shutdown failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  // Before the ready line: a supervisor may stop the node as soon as it reads it.
  process.once("SIGTERM", () => shutdown("SIGTERM"));
  process.once("SIGINT", () => shutdown("SIGINT"));
  process.stdout.write(`Cumulo ready (roles: ${roles.join(", ")})\n`);
}

export function buildCli(): Command {
  const program = new Command("cumulo")
    .description("Cumulo platform API")
    .version(API_VERSION, "-V, --version", "print the version of Cumulo")
    .showHelpAfterError()
    .addHelpText("after", EXIT_STATUS_HELP)
    // Commander's usage errors are thrown rather than exiting with status 1; `main` exits with 2.
    // Set before the commands are added: each inherits it.
    .exitOverride()
    // Before any command writes: what it creates under the data dir, or a backup, is private.
    .hook("preAction", () => {
      if (loadConfig().dataDirMode === "private") createPrivately();
    });

  program
    .command("serve", { isDefault: true })
    .description("start the roles in CUMULO_ROLES (default: api, worker and edge)")
    .action(() => serve(loadConfig()));

  program
    .command("dev")
    .description("start like serve, with developer mode on (state, snapshots, time, faults under /_cumulo/)")
    .option("--seed <file>", "seed the store from a JSON or YAML file once started")
    .addOption(
      new Option("--videos <transition>", "video processing: instant skips ffmpeg").choices([
        "real",
        "instant",
      ]),
    )
    .addOption(
      new Option("--libraries <transition>", "library provisioning: instant provisions at creation").choices([
        "real",
        "instant",
      ]),
    )
    .action(
      async (options: { seed?: string; videos?: "real" | "instant"; libraries?: "real" | "instant" }) => {
        const config = loadConfig();
        const seed = options.seed === undefined ? undefined : await seedFile(options.seed);
        await serve(
          {
            ...config,
            devMode: true,
            devTransitions: {
              video: options.videos ?? config.devTransitions.video,
              library: options.libraries ?? config.devTransitions.library,
            },
          },
          seed,
        );
      },
    );

  const state = program
    .command("state")
    .description(
      "developer mode: reset, save, load or seed the store and blobs (stop the server first, or use Redis)",
    );
  // Checked before the store is opened.
  const snapshotName = async (name: string) => {
    const { SNAPSHOT_NAME } = await import("./devmode/state-service.ts");
    if (!new RegExp(SNAPSHOT_NAME).test(name)) {
      throw new UsageError(`snapshot name must be 1-40 characters from [a-z0-9_], got "${name}"`);
    }
    return name;
  };
  state
    .command("save <name>")
    .description("save the store and blobs as a named snapshot")
    .action(async (name: string) => {
      const snapshot = await snapshotName(name);
      await withState(async (state) => {
        const saved = await state.save(snapshot);
        if (saved.outcome !== "saved") throw new CliError(await filesInBucketMessage());
        print(saved.snapshot);
      });
    });
  state
    .command("load <name>")
    .description("replace the store and blobs with a snapshot")
    .action(async (name: string) => {
      const snapshot = await snapshotName(name);
      await withState(async (state) => {
        const loaded = await state.load(snapshot);
        switch (loaded.outcome) {
          case "loaded":
            return print({ loaded: name });
          case "not_found":
            throw new CliError(`snapshot ${name} not found`);
          case "schema_mismatch":
            throw new CliError(`snapshot ${name} was saved at another schema version`);
          case "files_in_bucket":
            throw new CliError(await filesInBucketMessage());
        }
      });
    });
  state
    .command("reset")
    .addOption(
      new Option(
        "--to <target>",
        "bootstrap: keep the default organization (with --org: keep the organization and its keys)",
      )
        .choices(["bootstrap", "empty"])
        .default("bootstrap"),
    )
    .option("--org <id>", "reset only this organization, leaving the others as they are")
    .description("empty the store and blobs, or one organization")
    .action(({ to, org }: { to: "bootstrap" | "empty"; org?: string }) => {
      const id = org === undefined ? undefined : organizationId(org);
      return withState(async (state) => {
        if (id !== undefined) {
          const reset = await state.resetOrganization(id, to);
          if (reset.outcome === "not_found") throw new CliError(`organization ${org} not found`);
          return print({ reset: to, organization_id: id });
        }
        const { generatedKey } = await state.reset(to);
        print({ reset: to, ...(generatedKey ? { generated_key: generatedKey } : {}) });
      });
    });

  state
    .command("seed <file>")
    .description("add a known world from a JSON or YAML file (all or nothing)")
    .action((file: string) =>
      withState(async (state, services, deps) => {
        const seed = await seedFile(file);
        const [{ buildApp }, { PlaceholderRenditions }, { seedAtomically }] = await Promise.all([
          import("./app.ts"),
          import("./devmode/placeholder.ts"),
          import("./devmode/seed.ts"),
        ]);
        const app = await buildApp(deps, services);
        try {
          const placeholder = PlaceholderRenditions.of(deps.config);
          print(seeded(await seedAtomically(app, state, services.identity, seed, () => placeholder.mp4())));
        } finally {
          await app.close();
        }
      }),
    );

  program
    .command("migrate")
    .description("bring the store up to the latest schema")
    .action(async () => {
      // Opening the store migrates it; the names say what a rolling upgrade's first step changed.
      let applied: string[] = [];
      await withCore(
        async () => () => undefined,
        async () => undefined,
        (names) => {
          applied = names;
        },
      );
      print({ migrated: true, applied });
    });

  program
    .command("openapi")
    .description("print the OpenAPI document")
    .action(async () => {
      const { buildApp } = await import("./app.ts");
      const { publishedDocument } = await import("./http/openapi.ts");
      // The document comes from the routes, not from any data: it is made on a scratch SQLite store,
      // so printing it neither needs the configured store nor creates or migrates it (a `./data` in
      // the directory it ran in, or a production database's migrations; QA of 4 December).
      const scratch = await mkdtemp(join(tmpdir(), "cumulo-openapi-"));
      try {
        const config = { ...loadConfig(), dataDir: scratch, databaseUrl: undefined, redisUrl: undefined };
        await withCore(
          async () => (await import("./services.ts")).createServices,
          async (services, deps) => {
            const app = await buildApp(deps, services);
            await app.ready();
            print(publishedDocument(app.swagger()));
            await app.close();
          },
          // A scratch store, made on purpose: no note of it.
          () => {},
          config,
        );
      } finally {
        await rm(scratch, { recursive: true, force: true });
      }
    });

  program
    .command("backup")
    .requiredOption("--to <dir>", "an empty or new directory for the backup")
    .description("back up the SQLite store, the blobs and the secret key file while the server runs")
    .action(async ({ to }: { to: string }) => {
      const { backup } = await import("./ops/backup.ts");
      const result = await backup(loadConfig(), to);
      switch (result.outcome) {
        case "backed_up":
          if (result.manifest.blobs?.store === "s3") {
            process.stderr.write(
              `The blobs were not copied: they stay in S3 bucket ${result.manifest.blobs.bucket}; protect them with the bucket's versioning or replication (docs/operations.md, Backups)\n`,
            );
          }
          return print(result.manifest);
        case "postgres":
          throw new CliError(
            "DATABASE_URL is set: back up PostgreSQL with pg_dump, and the blobs (the blob directory, or the S3 bucket's versioning or replication) (docs/operations.md, Backups)",
          );
        case "target_not_empty":
          throw new CliError(`--to ${to} is not empty (or not a directory); give a new or empty directory`);
        case "target_in_data_dir":
          throw new CliError(`--to ${to} is inside CUMULO_DATA_DIR; give a directory outside it`);
        case "no_database":
          throw new CliError("no store to back up in CUMULO_DATA_DIR (cumulo.sqlite not found)");
        case "store_unreadable":
          throw new CliError(
            `cannot read the store in CUMULO_DATA_DIR (${result.path}): ${result.reason}; run the backup as the account that runs the server. Nothing was backed up`,
          );
        case "newer_store":
          throw new CliError(
            `the store was migrated by a newer Cumulo (migrations this version does not know: ${result.migrations.join(", ")}); back it up with that version or a newer one. Nothing was backed up`,
          );
      }
    });

  program
    .command("restore")
    .requiredOption("--from <dir>", "a directory written by cumulo backup")
    .description("restore a backup into an empty CUMULO_DATA_DIR (SQLite); start the server afterwards")
    .action(async ({ from }: { from: string }) => {
      const config = loadConfig();
      const { restore } = await import("./ops/backup.ts");
      const result = await restore(config, from);
      switch (result.outcome) {
        case "restored":
          if (result.manifest.blobs?.store === "s3") {
            // A node started on the local store would answer 404 for every file.
            process.stderr.write(
              `The blobs are not in this backup: they are in S3 bucket ${result.manifest.blobs.bucket}; start the nodes with CUMULO_BLOB_STORE=s3 and that bucket (or one restored from its versions or replica) (docs/operations.md, Backups)\n`,
            );
          }
          return print({ restored: from, data_dir: config.dataDir, ...result.manifest });
        case "postgres":
          throw new CliError(
            "DATABASE_URL is set: restore PostgreSQL with pg_restore and copy the blobs (docs/operations.md, Backups)",
          );
        case "data_dir_not_empty":
          throw new CliError(
            `CUMULO_DATA_DIR ${config.dataDir} is not empty (or not a directory); restore only into an empty data dir`,
          );
        case "not_a_backup":
          throw new CliError(`--from ${from} is not a complete backup (no manifest.json or cumulo.sqlite)`);
        case "newer_version":
          throw new CliError(
            `--from ${from} was taken from Cumulo ${result.version}, whose store has migrations this version does not know (${result.migrations.join(", ")}); restore it with that version or a newer one`,
          );
        case "damaged":
          throw new CliError(`--from ${from} is damaged: ${result.reason}; nothing was restored`);
      }
    });

  const orgs = program.command("orgs").description("organizations");
  orgs
    .command("create")
    .requiredOption("--name <name>", "organization name")
    .description("create an organization with its first user, billing account and admin key")
    .action(({ name }: { name: string }) => {
      const checked = nameOption(name.trim(), ORGANIZATION_NAME_MAX);
      return withIdentity(async (services) => {
        print(await services.identity.createOrganization(checked));
      });
    });
  orgs
    .command("list")
    .description("list organizations")
    .action(() => withIdentity(async (services) => print(await services.identity.listOrganizations())));
  orgs
    .command("delete")
    .requiredOption("--org <id>", "organization id")
    .addOption(new Option("--yes", "confirm: everything of the organization goes, for good").default(false))
    .description(
      "delete an organization and everything it holds (users, keys, libraries, videos and their files, distributions, cloud resources), leaving the others as they are",
    )
    .action(({ org, yes }: { org: string; yes: boolean }) => {
      const id = organizationId(org);
      if (!yes) {
        throw new UsageError(
          `deleting organization ${id} removes all its data for good: add --yes to confirm`,
        );
      }
      // Developer mode's reset of one organization to nothing: the same deletion, files and caches included.
      return withState(async (state) => {
        const deleted = await state.resetOrganization(id, "empty");
        if (deleted.outcome === "not_found") throw new CliError(`organization ${org} not found`);
        print({ deleted: true, organization_id: id });
      });
    });

  const cdn = program.command("cdn").description("CDN distributions");
  cdn
    .command("release-hostname <hostname>")
    .addOption(new Option("--force", "also release a verified host name").default(false))
    .description(
      "delete the distribution that holds a host name, in whichever organization, so another can claim it: a pending (never verified) claim; a verified one only with --force; a library's name never",
    )
    .action(async (hostname: string, { force }: { force: boolean }) => {
      const { HOSTNAME_PATTERN } = await import("./cdn/schemas.ts");
      if (!new RegExp(HOSTNAME_PATTERN).test(hostname)) {
        throw new UsageError(`<hostname> must be a host name such as cdn.example.com, got "${hostname}"`);
      }
      await withServices(async (services) => {
        const result = await services.cdn.releaseHostname(hostname, { force });
        switch (result.outcome) {
          case "released":
            return print({
              hostname: result.distribution.hostname,
              distribution_id: result.distribution.id,
              organization_id: result.distribution.organization_id,
              was: result.was,
              released: true,
            });
          case "verified":
            throw new CliError(`${hostname} is verified by its organization; --force releases it anyway`);
          case "library_distribution":
            throw new CliError(`${hostname} is a media library's own name; it goes with its library only`);
          case "not_found":
            throw new CliError(`no distribution has the host name ${hostname}`);
        }
      });
    });

  const keys = program.command("keys").description("organization API keys");
  keys
    .command("create")
    .requiredOption("--org <id>", "organization id")
    .option("--name <name>", "key name", "api key")
    .addOption(new Option("--read-only", "key may only read").default(false))
    .description("create an API key (the secret is printed once)")
    .action(({ org, name, readOnly }: { org: string; name: string; readOnly: boolean }) => {
      const organization = organizationId(org);
      const keyName = nameOption(name, API_KEY_NAME_MAX);
      return withIdentity(async (services) => {
        const result = await services.identity.createApiKey(organization, { name: keyName, readOnly });
        if (result.outcome === "organization_not_found") throw new CliError(`organization ${org} not found`);
        print({ id: result.id, prefix: result.prefix, api_key: result.api_key });
      });
    });
  keys
    .command("list")
    .requiredOption("--org <id>", "organization id")
    .description("list API keys (no secrets)")
    .action(({ org }: { org: string }) => {
      const organization = organizationId(org);
      return withIdentity(async (services) => {
        const list = await services.identity.listApiKeys(organization);
        if (!list) throw new CliError(`organization ${org} not found`);
        print(list);
      });
    });
  keys
    .command("revoke <keyId>")
    .description("revoke an API key; it stops working at once")
    .action((keyId: string) => {
      const id = positiveId(keyId, "key id");
      return withIdentity(async (services) => {
        if ((await services.identity.revokeApiKey(id)).outcome === "not_found") {
          throw new CliError(`key ${keyId} not found or already revoked`);
        }
        print({ id, revoked: true });
      });
    });

  const users = program.command("users").description("console users (people who sign in at /console)");
  users
    .command("create")
    .requiredOption("--org <id>", "organization id")
    .requiredOption("--email <email>", "the email the user signs in with")
    .addOption(new Option("--read-only", "the user may look at everything and change nothing").default(false))
    .description(
      "create a console user: the password is read from stdin when piped, else a one-time invitation link is printed",
    )
    .action(({ org, email, readOnly }: { org: string; email: string; readOnly: boolean }) => {
      const organization = organizationId(org);
      return withIdentity(async (services) => {
        const password = await passwordFromStdin();
        const result = await services.console.createUser({
          organizationId: organization,
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
            // A malformed --email is a wrong command line; a refused password came on stdin.
            throw new (result.errors.every((error) => error.field === "email") ? UsageError : CliError)(
              result.errors
                .map(
                  (error) => `${error.field === "email" ? "--email" : "password (stdin)"}: ${error.message}`,
                )
                .join("; "),
            );
        }
      });
    });
  users
    .command("list")
    .requiredOption("--org <id>", "organization id")
    .description("list the organization's console users")
    .action(({ org }: { org: string }) => {
      const organization = organizationId(org);
      return withIdentity(async (services) => {
        const list = await services.console.listUsers(organization);
        if (!list) throw new CliError(`organization ${org} not found`);
        print(list);
      });
    });
  users
    .command("remove <userId>")
    .description("remove a console user; their sessions end at once")
    .action((userId: string) => {
      const id = positiveId(userId, "user id");
      return withIdentity(async (services) => {
        if ((await services.console.removeUser(id)).outcome === "not_found") {
          throw new CliError(`console user ${userId} not found`);
        }
        print({ id, removed: true });
      });
    });

  return program;
}

/**
 * The password piped to `users create` (one line; the final line break is not part of it), or
 * undefined when there is none on stdin (a terminal, /dev/null, a pipe that sends nothing): then the
 * user gets an invitation link instead. More lines (a file, or the rest of a script's `while read`
 * input) are refused: no one could type that password at the sign-in form. So are an empty line and
 * an empty file (`< password.txt`), meant as a password: they made an invited user (QA of 6 December).
 */
async function passwordFromStdin(): Promise<string | undefined> {
  if (process.stdin.isTTY) return undefined;
  const fromFile = fstatSync(0).isFile();
  let text = "";
  for await (const chunk of process.stdin) text += String(chunk);
  const password = text.replace(/\r?\n$/, "");
  const lines = password.split(/\r?\n/).length;
  if (lines > 1) throw new CliError(`password (stdin) must be one line, got ${lines}`);
  if (password === "" && (text !== "" || fromFile)) {
    throw new CliError(
      "password (stdin) is empty: give one line of 10-200 characters, or no stdin for an invitation link",
    );
  }
  return password === "" ? undefined : password;
}

/**
 * A first word that names no command (`cumulo bogus`), which commander would hand to the default
 * command, `serve`, to be refused as "too many arguments for 'serve'"; or the word after `help`
 * (`cumulo help bogus`), for which commander prints the whole help without saying what is wrong.
 */
function unknownCommand(program: Command, argv: string[]): string | undefined {
  const word = argv[2] === "help" ? argv[3] : argv[2];
  if (word === undefined || word.startsWith("-") || word === "help") return undefined;
  const known = program.commands.some(
    (command) => command.name() === word || command.aliases().includes(word),
  );
  return known ? undefined : word;
}

export async function main(argv: string[]): Promise<void> {
  // A reader that stops early (`cumulo openapi | head`) is done with the output, not a failure.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    process.exit(0);
  });
  try {
    const program = buildCli();
    const unknown = unknownCommand(program, argv);
    if (unknown !== undefined) program.error(`error: unknown command '${unknown}'`);
    await program.parseAsync(argv);
  } catch (error) {
    // Commander has written its message (and help) already; `--help` and `--version` end here with 0.
    if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : USAGE_ERROR);
    const known = error instanceof CliError || error instanceof ConfigError;
    process.stderr.write(
      `cumulo: ${known ? error.message : error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(error instanceof UsageError ? USAGE_ERROR : RUNTIME_ERROR);
  }
}
