import { type Config, loadConfig } from "../../src/config.ts";
import type { StartOptions } from "../../src/core.ts";
import { type RunningCumulo, startCumulo } from "../../src/roles.ts";
import { createMigratedTestStore, type TestStore } from "./store.ts";

export const ADMIN_KEY = "test_admin_key_0123456789abcdef";

export interface HttpResponse<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  headers?: Record<string, string>;
  json?: unknown;
  form?: Record<string, string>;
  body?: string | Uint8Array | FormData;
  /** Sends no credential header at all. */
  anonymous?: boolean;
  /** Key to send instead of the admin key. */
  key?: string;
}

export interface TestApp {
  cumulo: RunningCumulo;
  store: TestStore;
  config: Config;
  baseUrl: string;
  adminKey: string;
  /** A request through the real HTTP listener; sends `Authorization: Bearer <admin key>` unless told otherwise. */
  request<T = any>(method: string, path: string, options?: RequestOptions): Promise<HttpResponse<T>>;
  /** Cloud-style request: the key goes in the `apikey` header. */
  cloud<T = any>(method: string, path: string, options?: RequestOptions): Promise<HttpResponse<T>>;
  /** A second organization with its own admin key, for isolation tests. */
  createOrganization(
    name?: string,
  ): Promise<{ organizationId: string; key: string; userId: number; billingAccountId: number }>;
  close(): Promise<void>;
}

async function send<T>(
  baseUrl: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  options: RequestOptions,
) {
  let body = options.body;
  const allHeaders = { ...headers, ...options.headers };
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    allHeaders["content-type"] ??= "application/json";
  } else if (options.form) {
    body = new URLSearchParams(options.form).toString();
    allHeaders["content-type"] ??= "application/x-www-form-urlencoded";
  }
  const response = await fetch(baseUrl + path, { method, headers: allHeaders, body });
  const text = await response.text();
  let parsed: unknown = text;
  if ((response.headers.get("content-type") ?? "").includes("json") && text !== "") parsed = JSON.parse(text);
  return { status: response.status, headers: response.headers, body: parsed as T, text };
}

/**
 * Starts Cumulo through the same code path as `cumulo serve`, on a store of its own, listening on a
 * free port. Environment overrides are applied on top of the test defaults.
 */
export async function startTestApp(
  env: Record<string, string> = {},
  options: { store?: TestStore } & StartOptions = {},
): Promise<TestApp> {
  // A given store is shared (several nodes on one database) and left for its owner to drop.
  const store = options.store ?? (await createMigratedTestStore());
  try {
    return await startOn(store, env, options);
  } catch (error) {
    // A start refused (a bad setting under test) leaves no database behind.
    if (!options.store) await store.drop();
    throw error;
  }
}

async function startOn(
  store: TestStore,
  env: Record<string, string>,
  options: { store?: TestStore } & StartOptions,
): Promise<TestApp> {
  const config = loadConfig({
    PORT: "0",
    CUMULO_EDGE_PORT: "off",
    CUMULO_LOG_LEVEL: "silent",
    // A test's fetch keeps its idle connections open, and every close would wait the whole grace (1 s
    // by default) for them; tests of the grace itself set their own.
    CUMULO_SHUTDOWN_GRACE_MS: "50",
    CUMULO_BOOTSTRAP_API_KEY: ADMIN_KEY,
    CUMULO_DATA_DIR: store.dataDir,
    CUMULO_REDIS_PREFIX: store.redisPrefix,
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    ...env,
  });
  const cumulo = await startCumulo(config, options);
  const baseUrl = cumulo.apiUrl ?? "";
  const withKey = (header: "authorization" | "apikey", options: RequestOptions): Record<string, string> => {
    if (options.anonymous) return {};
    const key = options.key ?? ADMIN_KEY;
    return header === "authorization" ? { authorization: `Bearer ${key}` } : { apikey: key };
  };
  return {
    cumulo,
    store,
    config,
    baseUrl,
    adminKey: ADMIN_KEY,
    request: (method, path, options = {}) =>
      send(baseUrl, method, path, withKey("authorization", options), options),
    cloud: (method, path, options = {}) => send(baseUrl, method, path, withKey("apikey", options), options),
    async createOrganization(name = "Other org") {
      const created = await cumulo.services.identity.createOrganization(name);
      return {
        organizationId: created.organization_id,
        key: created.api_key,
        userId: created.user_id,
        billingAccountId: created.billing_account_id,
      };
    },
    async close() {
      await cumulo.close();
      if (!options.store) await store.drop();
    },
  };
}
