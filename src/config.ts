import { isIP } from "node:net";
import { isAbsolute, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ipaddr from "ipaddr.js";
import { STORAGE_RETRY_AFTER_S } from "./blobs/store.ts";
import { parsePool } from "./cloud/addresses.ts";
import { PG_CONNECT_TIMEOUT_MS } from "./store/pg-pool.ts";

export type Role = "api" | "worker" | "edge";
export const ALL_ROLES: readonly Role[] = ["api", "worker", "edge"];

/** The roles a process runs: the edge role with `CUMULO_EDGE_PORT=off` runs nothing. */
export const runningRoles = (config: Pick<Config, "roles" | "edgePort">): Role[] =>
  config.roles.filter((role) => role !== "edge" || config.edgePort !== "off");

export interface RateLimitSetting {
  max: number;
  windowMs: number;
}

export interface Location {
  slug: string;
  displayName: string;
  description: string;
  countryCode: string;
  publicPool: string;
  privatePool: string;
}

/** Where the blob store keeps objects when `CUMULO_BLOB_STORE=s3`. */
export interface S3BlobSettings {
  bucket: string;
  region: string;
  /** An S3-compatible service's URL; unset for AWS itself. */
  endpoint: string | undefined;
  forcePathStyle: boolean;
  /** Unset: the AWS SDK's default chain (AWS_* variables, shared config, instance role). */
  credentials: { accessKeyId: string; secretAccessKey: string } | undefined;
  /** Longest wait for a connection, or for the bucket's answer or next bytes (CUMULO_S3_TIMEOUT_MS). */
  timeoutMs: number;
}

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  /**
   * CUMULO_DATA_DIR_MODE: `private` (default) makes what the `cumulo` command creates (the data dir,
   * the store's files, blobs, ffmpeg's outputs, backups) its user's alone; `inherit` leaves the modes
   * to the process's umask, for a data dir shared with another account on purpose.
   */
  dataDirMode: "private" | "inherit";
  databaseUrl: string | undefined;
  /** PostgreSQL: parameterized queries as named prepared statements (CUMULO_PG_PREPARED_STATEMENTS, default true). */
  pgPreparedStatements: boolean;
  /**
   * PostgreSQL: how long a new connection may take to be ready before it fails, and a query may go
   * unanswered before the server is checked (CUMULO_PG_CONNECT_TIMEOUT_MS, default 10 s).
   */
  pgConnectTimeoutMs: number;
  /** Answers of plain GET routes kept until anything stored changes (CUMULO_KEPT_ANSWERS, default true; src/http/response-cache.ts). */
  keptAnswers: boolean;
  redisUrl: string | undefined;
  /** Media files: under the data dir (`local`, one node) or in a bucket every node shares (`s3`). */
  blobStore: { kind: "local" } | ({ kind: "s3" } & S3BlobSettings);
  /**
   * How often a node checks again for media storage that was away (CUMULO_STORAGE_RECHECK_MS,
   * default 10 s, as long as the `Retry-After` of its 503s): the bucket at start, stranded uploads.
   */
  storageRecheckMs: number;
  /** Start of every Redis key and channel name, so that deployments sharing one Redis stay apart. */
  redisPrefix: string;
  /** How long a node waits at start for Redis to answer before it stops (CUMULO_REDIS_START_TIMEOUT_MS, default 10 s). */
  redisStartTimeoutMs: number;
  bootstrapApiKey: string | undefined;
  edgePort: number | "off";
  publicUrl: string | undefined;
  /**
   * Addresses and CIDR ranges of the proxies in front of the API (CUMULO_TRUST_PROXY): a request
   * from one is taken to be from the client, scheme and host its `X-Forwarded-*` headers name.
   */
  trustProxy: string[];
  /**
   * A MaxMind DB file of address countries (CUMULO_GEOIP_DATABASE): with one, playback's country
   * rules look the viewer's address up instead of trusting a header any viewer can send.
   */
  geoip: { database: string; recheckMs: number } | undefined;
  roles: Role[];
  edgePublicUrl: string | undefined;
  edgeUrlStyle: "path" | "host";
  mediaDomain: string;
  webhookAllowPrivate: boolean;
  originAllowPrivate: boolean;
  /**
   * CUMULO_CDN_HOSTNAME_VERIFICATION: `dns` makes a customer's distribution prove, by a TXT record,
   * that the organization controls its host name before the edge serves it host-style; `off` keeps
   * first come, first served.
   */
  cdnHostnameVerification: "off" | "dns";
  /**
   * CUMULO_CDN_HOSTNAME_CLAIM_TTL_HOURS (72): how long a pending (never verified) claim of a host name
   * holds it against other organizations, in milliseconds.
   */
  cdnHostnameClaimTtlMs: number;
  /** CUMULO_DNS_SERVERS: the servers (`ip` or `ip:port`) host name verification asks; unset, the system's. */
  dnsServers: string[] | undefined;
  rateLimit: RateLimitSetting;
  /** Console sign-in attempts per (client address, email) pair (CUMULO_SIGN_IN_RATE_LIMIT). */
  signInRateLimit: RateLimitSetting;
  /**
   * Distinct wrong API keys per client address before the address is refused everything for the
   * rest of the window (CUMULO_FAILED_AUTH_RATE_LIMIT).
   */
  failedAuthRateLimit: RateLimitSetting;
  logLevel: string;
  regions: string[];
  locations: Location[];
  /** CUMULO_PUBLIC_IPS_PER_ORGANIZATION: public addresses one organization may hold per location; unset, no limit. */
  publicIpsPerOrganization: number | undefined;
  /** Key that encrypts stored secrets (object-storage secret keys); when unset, a random key kept in a file in the data dir. */
  secretKey: string | undefined;
  /** The built web console served at /console (CUMULO_CONSOLE_DIR; default the repository's web/dist). */
  consoleDir: string;
  providerUrls: Record<MigrationProvider, string>;
  /** CDN edge tuning (CUMULO_EDGE_*). */
  edge: {
    cacheBytes: number;
    /** Disk tier under the data dir for objects evicted from memory; 0 = no disk tier. */
    diskCacheBytes: number;
    maxObjectBytes: number;
    originTimeoutMs: number;
    /** A viewer connection with nothing sent or received for this long is closed. */
    idleTimeoutMs: number;
    analyticsFlushMs: number;
  };
  /** How many days the housekeeper keeps rows before deleting them; 0 keeps them forever. */
  retention: {
    /** Jobs that finished successfully (failed jobs stay for diagnosis). */
    doneJobsDays: number;
    /** CDN minute and five-minute rollups; the coarser ones, which answer `15m` and more, stay. */
    cdnMinuteDays: number;
  };
  /** Video processing (CUMULO_FFMPEG_*): how many ffmpeg/ffprobe runs at once, and for how long each. */
  video: {
    ffmpegConcurrency: number;
    ffmpegTimeoutMs: number;
  };
  /** Bounds of both HTTP listeners (API and edge); see src/http/listener.ts. */
  listener: {
    headersTimeoutMs: number;
    requestTimeoutMs: number;
    keepAliveTimeoutMs: number;
    maxHeaderBytes: number;
    /** At shutdown, how long open connections may still send requests (CUMULO_SHUTDOWN_GRACE_MS). */
    shutdownGraceMs: number;
  };
  /** Resumable uploads and URL imports of video sources (CUMULO_UPLOAD_*, CUMULO_IMPORT_*). */
  uploads: {
    /** An unfinished resumable upload is refused and removed this long after its creation. */
    expiryMs: number;
    /** Whether a URL import may reach loopback, private and reserved addresses (all of them). */
    importAllowPrivate: boolean;
    /** Addresses and CIDR ranges a URL import may reach although they are not public (internal origins). */
    importAllowAddresses: string[];
    /**
     * Unfinished resumable uploads one video may have (CUMULO_MAX_OPEN_UPLOADS_PER_VIDEO): creating
     * one more removes its oldest, so a signed upload authorization cannot fill the disk.
     */
    openPerVideo: number;
    /** Longest whole download of a URL import, and longest wait for its next bytes. */
    importTimeoutMs: number;
    importIdleTimeoutMs: number;
  };
  /** Prometheus `/metrics` (CUMULO_METRICS_*); off unless a port or a token is set (docs/operations.md, Monitoring). */
  metrics: {
    /** A listener of its own for `/metrics`; when set, the API port does not serve it. */
    port: number | undefined;
    host: string;
    /** Bearer token `/metrics` requires, wherever it is served. */
    token: string | undefined;
  };
  /** Developer mode (CUMULO_DEV_MODE): the `/_cumulo/` routes for state, time and faults (docs/dev-mode.md). */
  devMode: boolean;
  /** Developer mode's starting transitions (CUMULO_DEV_VIDEOS, CUMULO_DEV_LIBRARIES): `instant` skips the work. */
  devTransitions: { video: "real" | "instant"; library: "real" | "instant" };
  limits: {
    jsonBodyBytes: number;
    subtitleBytes: number;
    thumbnailBytes: number;
    videoSourceBytes: number;
    /** Webhook delivery: whole-attempt timeout, and how much of the receiver's answer is kept. */
    webhookTimeoutMs: number;
    webhookResponseBytes: number;
    /** Fallback poll of the webhook dispatcher, for work committed by other nodes without a wake-up. */
    webhookPollMs: number;
    /** Webhook endpoints one library may have; creating another is refused (409). */
    webhookEndpointsPerLibrary: number;
    /** Paths in one CDN purge request. */
    purgePaths: number;
    /** Values in one security rule (referrers, countries). */
    securityValues: number;
    /** Nesting of objects and arrays in a JSON body. */
    jsonDepth: number;
    /** Multipart bodies: parts, text fields, bytes of one text field, header lines of one part. */
    multipart: { parts: number; fields: number; fieldBytes: number; partHeaders: number };
    /** Streamed uploads (multipart or raw) one API key may have in progress at once, per node. */
    concurrentUploadsPerKey: number;
  };
}

export type MigrationProvider = "vimeo" | "wistia" | "youtube" | "dailymotion" | "cloudflare";

/**
 * An address to listen on (default 127.0.0.1): a host name, or an IP address written as one. A
 * malformed address (`999.1.1.1`, `::zz`) is refused here, before the store is opened and the
 * default organization made; one that is well formed but not this machine's is found at listen.
 */
function listenAddress(env: Env, name: string): string {
  const raw = env[name] || "127.0.0.1";
  const looksNumeric = /^[\d.]+$/.test(raw) || raw.includes(":");
  if (looksNumeric && isIP(raw) === 0) {
    throw new ConfigError(name, `must be an IP address or a host name, got "${raw}"`);
  }
  return raw;
}

export class ConfigError extends Error {
  constructor(variable: string, problem: string) {
    super(`Invalid configuration: ${variable} ${problem}`);
    this.name = "ConfigError";
  }
}

type Env = Record<string, string | undefined>;

const METRICS_TOKEN = /^[\x21-\x7e]{16,256}$/;
const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
const BOOTSTRAP_KEY = /^[A-Za-z0-9_-]{20,200}$/;

function port(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value > 65535)
    throw new ConfigError(name, `must be a port number 0-65535, got "${raw}"`);
  return value;
}

function optionalPort(env: Env, name: string): number | undefined {
  return env[name] === undefined || env[name] === "" ? undefined : port(env, name, 0);
}

const ANY_ADDRESS = new Set(["0.0.0.0", "::"]);

/**
 * Two listeners of one process on one port: the second bind would fail with EADDRINUSE naming its
 * own variables, and the operator would look for another program holding a port Cumulo itself took.
 */
function refuseSharedPorts(listeners: { variable: string; port: number | undefined; host: string }[]): void {
  const bound = listeners.filter((listener) => listener.port !== undefined && listener.port !== 0);
  for (const [index, later] of bound.entries()) {
    const earlier = bound
      .slice(0, index)
      .find(
        (other) =>
          other.port === later.port &&
          (other.host === later.host || ANY_ADDRESS.has(other.host) || ANY_ADDRESS.has(later.host)),
      );
    if (earlier) {
      throw new ConfigError(
        later.variable,
        `is ${later.port}, the port of ${earlier.variable} too: each listener of a node needs a port of its own`,
      );
    }
  }
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (["true", "1", "yes"].includes(raw.toLowerCase())) return true;
  if (["false", "0", "no"].includes(raw.toLowerCase())) return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}

function realOrInstant(env: Env, name: string): "real" | "instant" {
  const raw = env[name] || "real";
  if (raw !== "real" && raw !== "instant")
    throw new ConfigError(name, `must be real or instant, got "${raw}"`);
  return raw;
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === "") return undefined;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    // A store URL carries a password: its user and password (up to the last "@") are not echoed.
    const shown = raw.replace(/^([a-z][a-z0-9+.-]*:\/\/)?.*@/i, "$1***@");
    throw new ConfigError(name, `must be a URL, got "${shown}"`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use ${protocols.join(" or ")}, got "${parsed.protocol}"`);
  }
  return raw.replace(/\/+$/, "");
}

function nonNegativeInt(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  return Number(raw);
}

/** Dates the stores and HTTP headers can hold: a retention or expiry of at most 100 years. */
const MAX_RETENTION_DAYS = 36_500;

function retentionDays(env: Env, name: string, fallback: number): number {
  const days = nonNegativeInt(env, name, fallback);
  if (days > MAX_RETENTION_DAYS)
    throw new ConfigError(
      name,
      `must be at most ${MAX_RETENTION_DAYS} (0 keeps rows forever), got "${days}"`,
    );
  return days;
}

function positiveInt(env: Env, name: string, fallback: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) <= 0)
    throw new ConfigError(name, `must be a positive integer, got "${raw}"`);
  if (Number(raw) > max) throw new ConfigError(name, `must be at most ${max}, got "${raw}"`);
  return Number(raw);
}

/** A positive integer, or undefined when the variable is unset or empty. */
const optionalPositiveInt = (env: Env, name: string): number | undefined =>
  env[name] === undefined || env[name] === "" ? undefined : positiveInt(env, name, 1);

/**
 * The origin of the absolute API URLs Cumulo hands out: `CUMULO_PUBLIC_URL`, else `http://HOST:PORT`
 * (the contract's default), never the `Host` a request happened to name.
 */
export const publicOrigin = (config: Pick<Config, "publicUrl" | "host" | "port">): string =>
  (config.publicUrl ?? `http://${config.host}:${config.port}`).replace(/\/+$/, "");

/** How long a node waits at start for Redis to answer, unless CUMULO_REDIS_START_TIMEOUT_MS says otherwise. */
export const REDIS_START_TIMEOUT_MS = 10_000;

/** How often a GeoIP database's file is looked at for a newer copy, unless CUMULO_GEOIP_RECHECK_MS says otherwise. */
const GEOIP_RECHECK_MS = 60_000;

/** Node's timers wait at most 2^31 - 1 ms (about 24.8 days): a longer wait fires after 1 ms. */
const MAX_TIMER_MS = 2_147_483_647;

/** A wait a timer measures, in milliseconds. */
const timerMs = (env: Env, name: string, fallback: number): number =>
  positiveInt(env, name, fallback, MAX_TIMER_MS);

/** A wait a timer measures, given in seconds; answered in milliseconds. */
const timerSeconds = (env: Env, name: string, fallback: number): number =>
  positiveInt(env, name, fallback, Math.floor(MAX_TIMER_MS / 1000)) * 1000;

/** Bounds of a rate limit: Redis counts and expires in whole numbers, and the headers count seconds. */
const MAX_RATE_LIMIT_REQUESTS = 1_000_000_000;
const MAX_RATE_LIMIT_WINDOW_MS = 24 * 3_600_000;

export function parseRateLimit(raw: string): RateLimitSetting | undefined {
  const match = /^(\d{1,10})\/(\d{1,5})([smh])$/.exec(raw);
  if (!match) return undefined;
  const unitMs = { s: 1000, m: 60_000, h: 3_600_000 }[match[3] as "s" | "m" | "h"];
  const max = Number(match[1]);
  const windowMs = Number(match[2]) * unitMs;
  if (max < 1 || max > MAX_RATE_LIMIT_REQUESTS || windowMs < 1 || windowMs > MAX_RATE_LIMIT_WINDOW_MS) {
    return undefined;
  }
  return { max, windowMs };
}

/** The rate limit `name` sets (`parseRateLimit`), or `fallback`'s; `examples` say what a bad one should look like. */
function rateLimitSetting(env: Env, name: string, fallback: string, examples: string): RateLimitSetting {
  const raw = env[name] || fallback;
  const setting = parseRateLimit(raw);
  if (!setting) {
    throw new ConfigError(
      name,
      `must look like ${examples} (1 to 1000000000 requests in at most 24h), got "${raw}"`,
    );
  }
  return setting;
}

function list(env: Env, name: string, fallback: string[]): string[] {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  return raw
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
}

/** A list that names at least one item, each once. */
function distinctList(env: Env, name: string, fallback: string[], what: string): string[] {
  const items = list(env, name, fallback);
  if (items.length === 0) throw new ConfigError(name, `names no ${what}`);
  const twice = items.find((item, index) => items.indexOf(item) !== index);
  if (twice !== undefined) throw new ConfigError(name, `names the ${what} "${twice}" twice`);
  return items;
}

/** A DNS server as `Resolver.setServers` takes it: `ip`, `ip:port` or `[ipv6]:port`. */
function isDnsServer(text: string): boolean {
  if (isIP(text) !== 0) return true;
  const withPort = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  if (!withPort) return false;
  const port = Number(withPort[3]);
  return isIP(withPort[1] ?? withPort[2] ?? "") !== 0 && port >= 1 && port <= 65_535;
}

function dnsServers(env: Env, name: string): string[] | undefined {
  const servers = list(env, name, []);
  const bad = servers.find((server) => !isDnsServer(server));
  if (bad !== undefined) {
    throw new ConfigError(name, `has "${bad}", which is not an IP address with an optional :port`);
  }
  return servers.length > 0 ? servers : undefined;
}

function addressRanges(env: Env, name: string): string[] {
  const ranges = list(env, name, []);
  for (const range of ranges) {
    if (!ipaddr.isValid(range) && !ipaddr.isValidCIDR(range)) {
      throw new ConfigError(name, `has "${range}", which is neither an IP address nor a CIDR range`);
    }
  }
  return ranges;
}

const SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** The RFC 5737 documentation ranges, then /24s of the RFC 2544 benchmarking range 198.18.0.0/15. */
const DOCUMENTATION_POOLS = ["203.0.113.0/24", "198.51.100.0/24", "192.0.2.0/24"];

function defaultPublicPool(index: number): string {
  const next = index - DOCUMENTATION_POOLS.length;
  return DOCUMENTATION_POOLS[index] ?? `198.${18 + Math.floor(next / 256)}.${next % 256}.0/24`;
}

function cidrsOverlap(a: string, b: string): boolean {
  try {
    const [first, firstBits] = ipaddr.parseCIDR(a.trim());
    const [second, secondBits] = ipaddr.parseCIDR(b.trim());
    return (
      first.kind() === second.kind() && (first.match(second, secondBits) || second.match(first, firstBits))
    );
  } catch {
    return false; // a malformed pool is refused with its own message when the locations are built
  }
}

/** A location's settings are named after its slug: `local-1` has CUMULO_LOCATION_LOCAL_1_NAME and so on. */
const locationVariable = (slug: string, setting: string): string =>
  `CUMULO_LOCATION_${slug.toUpperCase().replace(/-/g, "_")}_${setting}`;

/** An address pool as cloud resources take it (`parsePool`); refused here, naming its variable. */
function pool(env: Env, variable: string, fallback: string): string {
  const value = env[variable] ?? fallback;
  try {
    parsePool(value);
  } catch {
    throw new ConfigError(variable, `must be an IPv4 CIDR block from /8 to /30, got "${value}"`);
  }
  return value;
}

function locations(env: Env): Location[] {
  const slugs = distinctList(env, "CUMULO_LOCATIONS", ["local-1"], "location");
  const configured = slugs.map((slug, index) => {
    if (!SLUG.test(slug)) throw new ConfigError("CUMULO_LOCATIONS", `has an invalid slug "${slug}"`);
    const variable = (setting: string) => locationVariable(slug, setting);
    return {
      slug,
      displayName: env[variable("NAME")] ?? `Local ${index + 1}`,
      description: env[variable("DESCRIPTION")] ?? "Simulated location on this Cumulo node",
      countryCode: env[variable("COUNTRY")] ?? "ZZ",
      publicPool: pool(env, variable("PUBLIC_POOL"), defaultPublicPool(index)),
      privatePool: pool(env, variable("PRIVATE_POOL"), `10.${index}.0.0/16`),
    };
  });
  // A public address names one floating IP across the platform, whatever its location.
  for (const [index, location] of configured.entries()) {
    const earlier = configured
      .slice(0, index)
      .find((other) => cidrsOverlap(other.publicPool, location.publicPool));
    if (earlier) {
      throw new ConfigError(
        locationVariable(location.slug, "PUBLIC_POOL"),
        `is ${location.publicPool}, which overlaps ${earlier.slug}'s public pool ${earlier.publicPool}`,
      );
    }
  }
  return configured;
}

const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

function blobStore(env: Env): Config["blobStore"] {
  const kind = env.CUMULO_BLOB_STORE || "local";
  if (kind === "local") return { kind };
  if (kind !== "s3") throw new ConfigError("CUMULO_BLOB_STORE", `must be local or s3, got "${kind}"`);
  const bucket = env.CUMULO_S3_BUCKET ?? "";
  if (!BUCKET.test(bucket))
    throw new ConfigError("CUMULO_S3_BUCKET", `must be an S3 bucket name, got "${bucket}"`);
  const accessKeyId = env.CUMULO_S3_ACCESS_KEY_ID || undefined;
  const secretAccessKey = env.CUMULO_S3_SECRET_ACCESS_KEY || undefined;
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    throw new ConfigError(
      accessKeyId ? "CUMULO_S3_SECRET_ACCESS_KEY" : "CUMULO_S3_ACCESS_KEY_ID",
      "must be set together with the other one of CUMULO_S3_ACCESS_KEY_ID and CUMULO_S3_SECRET_ACCESS_KEY",
    );
  }
  return {
    kind,
    bucket,
    region: env.CUMULO_S3_REGION || "us-east-1",
    endpoint: url(env, "CUMULO_S3_ENDPOINT", ["http:", "https:"]),
    forcePathStyle: bool(env, "CUMULO_S3_FORCE_PATH_STYLE", false),
    credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : undefined,
    timeoutMs: timerMs(env, "CUMULO_S3_TIMEOUT_MS", 30_000),
  };
}

/**
 * The `CUMULO_` variables of `env` that no setting reads: a misspelled name, or one that counts only
 * with another setting (`CUMULO_S3_BUCKET` under the local blob store). Each with the setting it may
 * stand for when its name without the prefix is one (`CUMULO_DATABASE_URL` for `DATABASE_URL`, which
 * an operator set and the node then ran on SQLite without a word: QA of session 48).
 */
export function settingsNotRead(env: Env = process.env): { name: string; meant: string | undefined }[] {
  const read = new Set<string>();
  loadConfig(
    new Proxy(env, {
      get(target, name) {
        if (typeof name === "string") read.add(name);
        return Reflect.get(target, name);
      },
    }),
  );
  return Object.keys(env)
    .filter((name) => name.startsWith("CUMULO_") && !read.has(name))
    .sort()
    .map((name) => {
      const unprefixed = name.slice("CUMULO_".length);
      return { name, meant: read.has(unprefixed) ? unprefixed : undefined };
    });
}

/** Reads the environment into a typed config; the first bad value stops with one line naming it. */
export function loadConfig(env: Env = process.env): Config {
  const roles = list(env, "CUMULO_ROLES", [...ALL_ROLES]);
  if (roles.length === 0) {
    throw new ConfigError("CUMULO_ROLES", `names no role (known: ${ALL_ROLES.join(", ")})`);
  }
  for (const role of roles) {
    if (!ALL_ROLES.includes(role as Role)) {
      throw new ConfigError("CUMULO_ROLES", `has unknown role "${role}" (known: ${ALL_ROLES.join(", ")})`);
    }
  }
  const rawEdgePort = env.CUMULO_EDGE_PORT;
  const edgePort = rawEdgePort === "off" ? "off" : port(env, "CUMULO_EDGE_PORT", 8081);
  // Off leaves the edge role out; a node with no other role would start, say it is ready, and serve nothing.
  if (edgePort === "off" && roles.every((role) => role === "edge")) {
    throw new ConfigError(
      "CUMULO_EDGE_PORT",
      "is off, and CUMULO_ROLES names no other role than edge: this node would run nothing",
    );
  }

  const databaseUrl = url(env, "DATABASE_URL", ["postgres:", "postgresql:"]);
  const pgPreparedStatements = bool(env, "CUMULO_PG_PREPARED_STATEMENTS", true);
  const keptAnswers = bool(env, "CUMULO_KEPT_ANSWERS", true);
  const redisUrl = url(env, "REDIS_URL", ["redis:", "rediss:"]);
  const redisPrefix = env.CUMULO_REDIS_PREFIX || "cumulo:";
  if (!/^[A-Za-z0-9:_.-]{1,64}$/.test(redisPrefix)) {
    throw new ConfigError("CUMULO_REDIS_PREFIX", "must be 1-64 characters from [A-Za-z0-9:_.-]");
  }

  const bootstrapApiKey = env.CUMULO_BOOTSTRAP_API_KEY || undefined;
  if (bootstrapApiKey !== undefined && !BOOTSTRAP_KEY.test(bootstrapApiKey)) {
    throw new ConfigError("CUMULO_BOOTSTRAP_API_KEY", "must be 20-200 characters from [A-Za-z0-9_-]");
  }

  const edgeUrlStyle = env.CUMULO_EDGE_URL_STYLE || "path";
  if (edgeUrlStyle !== "path" && edgeUrlStyle !== "host") {
    throw new ConfigError("CUMULO_EDGE_URL_STYLE", `must be path or host, got "${edgeUrlStyle}"`);
  }

  const cdnHostnameVerification = env.CUMULO_CDN_HOSTNAME_VERIFICATION || "off";
  if (cdnHostnameVerification !== "off" && cdnHostnameVerification !== "dns") {
    throw new ConfigError(
      "CUMULO_CDN_HOSTNAME_VERIFICATION",
      `must be off or dns, got "${cdnHostnameVerification}"`,
    );
  }

  const rateLimit = rateLimitSetting(env, "CUMULO_RATE_LIMIT", "600/60s", "600/60s, 100/1m or 5000/1h");
  const signInRateLimit = rateLimitSetting(
    env,
    "CUMULO_SIGN_IN_RATE_LIMIT",
    "10/15m",
    "10/15m, 5/60s or 50/1h",
  );
  const failedAuthRateLimit = rateLimitSetting(
    env,
    "CUMULO_FAILED_AUTH_RATE_LIMIT",
    "300/60s",
    "300/60s, 1000/10m or 5000/1h",
  );

  const logLevel = env.CUMULO_LOG_LEVEL || "info";
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError("CUMULO_LOG_LEVEL", `must be one of ${LOG_LEVELS.join(", ")}, got "${logLevel}"`);
  }

  const mediaDomain = env.CUMULO_MEDIA_DOMAIN || "media.cumulo.local";
  if (
    !/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i.test(
      mediaDomain,
    )
  ) {
    throw new ConfigError("CUMULO_MEDIA_DOMAIN", `must be a host name, got "${mediaDomain}"`);
  }

  const headersTimeoutMs = timerMs(env, "CUMULO_HEADERS_TIMEOUT_MS", 10_000);
  const requestTimeoutMs = timerMs(env, "CUMULO_REQUEST_TIMEOUT_MS", 300_000);
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError("CUMULO_HEADERS_TIMEOUT_MS", "must not be longer than CUMULO_REQUEST_TIMEOUT_MS");
  }

  const metricsToken = env.CUMULO_METRICS_TOKEN || undefined;
  if (metricsToken !== undefined && !METRICS_TOKEN.test(metricsToken)) {
    throw new ConfigError("CUMULO_METRICS_TOKEN", "must be 16-256 printable characters without spaces");
  }

  const apiPort = port(env, "PORT", 8080);
  const host = listenAddress(env, "HOST");
  const metricsPort =
    env.CUMULO_METRICS_PORT === "off" ? undefined : optionalPort(env, "CUMULO_METRICS_PORT");
  const metricsHost = listenAddress(env, "CUMULO_METRICS_HOST");
  // A token alone serves /metrics on the API port: on a node without one it would be served nowhere.
  if (metricsToken !== undefined && metricsPort === undefined && !roles.includes("api")) {
    throw new ConfigError(
      "CUMULO_METRICS_TOKEN",
      "is set, but this node runs no api role, whose port would serve /metrics: set CUMULO_METRICS_PORT too",
    );
  }
  refuseSharedPorts([
    { variable: "PORT", port: roles.includes("api") ? apiPort : undefined, host },
    {
      variable: "CUMULO_EDGE_PORT",
      port: roles.includes("edge") && edgePort !== "off" ? edgePort : undefined,
      host,
    },
    { variable: "CUMULO_METRICS_PORT", port: metricsPort, host: metricsHost },
  ]);

  const dataDirRaw = env.CUMULO_DATA_DIR || "./data";
  const dataDir = isAbsolute(dataDirRaw) ? dataDirRaw : resolve(process.cwd(), dataDirRaw);
  const dataDirMode = env.CUMULO_DATA_DIR_MODE || "private";
  if (dataDirMode !== "private" && dataDirMode !== "inherit") {
    throw new ConfigError("CUMULO_DATA_DIR_MODE", `must be private or inherit, got "${dataDirMode}"`);
  }

  return {
    port: apiPort,
    host,
    dataDir,
    dataDirMode,
    databaseUrl,
    pgPreparedStatements,
    pgConnectTimeoutMs: timerMs(env, "CUMULO_PG_CONNECT_TIMEOUT_MS", PG_CONNECT_TIMEOUT_MS),
    keptAnswers,
    redisUrl,
    blobStore: blobStore(env),
    storageRecheckMs: timerMs(env, "CUMULO_STORAGE_RECHECK_MS", STORAGE_RETRY_AFTER_S * 1000),
    redisPrefix,
    redisStartTimeoutMs: timerMs(env, "CUMULO_REDIS_START_TIMEOUT_MS", REDIS_START_TIMEOUT_MS),
    bootstrapApiKey,
    edgePort,
    publicUrl: url(env, "CUMULO_PUBLIC_URL", ["http:", "https:"]),
    trustProxy: addressRanges(env, "CUMULO_TRUST_PROXY"),
    geoip: env.CUMULO_GEOIP_DATABASE
      ? {
          database: resolve(process.cwd(), env.CUMULO_GEOIP_DATABASE),
          recheckMs: timerMs(env, "CUMULO_GEOIP_RECHECK_MS", GEOIP_RECHECK_MS),
        }
      : undefined,
    roles: roles as Role[],
    edgePublicUrl: url(env, "CUMULO_EDGE_PUBLIC_URL", ["http:", "https:"]),
    edgeUrlStyle,
    mediaDomain: mediaDomain.toLowerCase(),
    webhookAllowPrivate: bool(env, "CUMULO_WEBHOOK_ALLOW_PRIVATE", false),
    originAllowPrivate: bool(env, "CUMULO_ORIGIN_ALLOW_PRIVATE", false),
    cdnHostnameVerification,
    cdnHostnameClaimTtlMs:
      positiveInt(env, "CUMULO_CDN_HOSTNAME_CLAIM_TTL_HOURS", 72, MAX_RETENTION_DAYS * 24) * 3_600_000,
    dnsServers: dnsServers(env, "CUMULO_DNS_SERVERS"),
    rateLimit,
    signInRateLimit,
    failedAuthRateLimit,
    logLevel,
    regions: distinctList(env, "CUMULO_REGIONS", ["eu-central", "us-east", "ap-southeast"], "region"),
    locations: locations(env),
    publicIpsPerOrganization: optionalPositiveInt(env, "CUMULO_PUBLIC_IPS_PER_ORGANIZATION"),
    secretKey: env.CUMULO_SECRET_KEY || undefined,
    consoleDir: resolve(env.CUMULO_CONSOLE_DIR || fileURLToPath(new URL("../web/dist", import.meta.url))),
    providerUrls: {
      vimeo: url(env, "CUMULO_PROVIDER_VIMEO_URL", ["http:", "https:"]) ?? "https://api.vimeo.com",
      wistia: url(env, "CUMULO_PROVIDER_WISTIA_URL", ["http:", "https:"]) ?? "https://api.wistia.com",
      youtube:
        url(env, "CUMULO_PROVIDER_YOUTUBE_URL", ["http:", "https:"]) ?? "https://oauth2.googleapis.com",
      dailymotion:
        url(env, "CUMULO_PROVIDER_DAILYMOTION_URL", ["http:", "https:"]) ?? "https://api.dailymotion.com",
      cloudflare:
        url(env, "CUMULO_PROVIDER_CLOUDFLARE_URL", ["http:", "https:"]) ?? "https://api.cloudflare.com",
    },
    edge: {
      cacheBytes: positiveInt(env, "CUMULO_EDGE_CACHE_BYTES", 256 * 1024 * 1024),
      diskCacheBytes: nonNegativeInt(env, "CUMULO_EDGE_DISK_CACHE_BYTES", 0),
      maxObjectBytes: positiveInt(env, "CUMULO_EDGE_MAX_OBJECT_BYTES", 8 * 1024 * 1024),
      originTimeoutMs: timerMs(env, "CUMULO_EDGE_ORIGIN_TIMEOUT_MS", 10_000),
      idleTimeoutMs: timerMs(env, "CUMULO_EDGE_IDLE_TIMEOUT_MS", 60_000),
      analyticsFlushMs: timerMs(env, "CUMULO_EDGE_ANALYTICS_FLUSH_MS", 2_000),
    },
    retention: {
      doneJobsDays: retentionDays(env, "CUMULO_JOB_RETENTION_DAYS", 7),
      cdnMinuteDays: retentionDays(env, "CUMULO_CDN_MINUTE_RETENTION_DAYS", 35),
    },
    video: {
      ffmpegConcurrency: positiveInt(env, "CUMULO_FFMPEG_CONCURRENCY", 2),
      ffmpegTimeoutMs: timerSeconds(env, "CUMULO_FFMPEG_TIMEOUT_S", 1800),
    },
    listener: {
      headersTimeoutMs,
      requestTimeoutMs,
      keepAliveTimeoutMs: timerMs(env, "CUMULO_KEEP_ALIVE_TIMEOUT_MS", 5_000),
      maxHeaderBytes: positiveInt(env, "CUMULO_MAX_HEADER_BYTES", 16 * 1024),
      shutdownGraceMs: timerMs(env, "CUMULO_SHUTDOWN_GRACE_MS", 1_000),
    },
    uploads: {
      expiryMs: positiveInt(env, "CUMULO_UPLOAD_EXPIRY_S", 86_400, MAX_RETENTION_DAYS * 86_400) * 1000,
      importAllowPrivate: bool(env, "CUMULO_IMPORT_ALLOW_PRIVATE", false),
      importAllowAddresses: addressRanges(env, "CUMULO_IMPORT_ALLOW_ADDRESSES"),
      openPerVideo: positiveInt(env, "CUMULO_MAX_OPEN_UPLOADS_PER_VIDEO", 5),
      importTimeoutMs: timerSeconds(env, "CUMULO_IMPORT_TIMEOUT_S", 3600),
      importIdleTimeoutMs: timerSeconds(env, "CUMULO_IMPORT_IDLE_TIMEOUT_S", 30),
    },
    metrics: {
      port: metricsPort,
      host: metricsHost,
      token: metricsToken,
    },
    devMode: bool(env, "CUMULO_DEV_MODE", false),
    devTransitions: {
      video: realOrInstant(env, "CUMULO_DEV_VIDEOS"),
      library: realOrInstant(env, "CUMULO_DEV_LIBRARIES"),
    },
    limits: {
      jsonBodyBytes: positiveInt(env, "CUMULO_MAX_JSON_BYTES", 1024 * 1024),
      subtitleBytes: positiveInt(env, "CUMULO_MAX_SUBTITLE_BYTES", 5 * 1024 * 1024),
      thumbnailBytes: positiveInt(env, "CUMULO_MAX_THUMBNAIL_BYTES", 10 * 1024 * 1024),
      videoSourceBytes: positiveInt(env, "CUMULO_MAX_VIDEO_BYTES", 2 * 1024 * 1024 * 1024),
      webhookTimeoutMs: timerMs(env, "CUMULO_WEBHOOK_TIMEOUT_MS", 10_000),
      webhookResponseBytes: positiveInt(env, "CUMULO_WEBHOOK_MAX_RESPONSE_BYTES", 64 * 1024),
      webhookPollMs: timerMs(env, "CUMULO_WEBHOOK_POLL_MS", 500),
      webhookEndpointsPerLibrary: positiveInt(env, "CUMULO_WEBHOOK_ENDPOINTS_MAX", 100),
      purgePaths: positiveInt(env, "CUMULO_MAX_PURGE_PATHS", 1000),
      securityValues: positiveInt(env, "CUMULO_MAX_SECURITY_VALUES", 100),
      jsonDepth: positiveInt(env, "CUMULO_MAX_JSON_DEPTH", 64),
      multipart: {
        parts: positiveInt(env, "CUMULO_MULTIPART_MAX_PARTS", 30),
        fields: positiveInt(env, "CUMULO_MULTIPART_MAX_FIELDS", 20),
        fieldBytes: positiveInt(env, "CUMULO_MULTIPART_MAX_FIELD_BYTES", 64 * 1024),
        partHeaders: positiveInt(env, "CUMULO_MULTIPART_MAX_PART_HEADERS", 16),
      },
      concurrentUploadsPerKey: positiveInt(env, "CUMULO_MAX_CONCURRENT_UPLOADS", 4),
    },
  };
}
