import { publicOrigin } from "../config.ts";
import type { CoreDeps } from "../services.ts";
import { transactor } from "../store/transactions.ts";
import { AUTH_CACHE_TTL_MS, AuthCache } from "./auth-cache.ts";
import { ConsoleService } from "./console-service.ts";
import { IdentityRepository } from "./repository.ts";
import { IdentityService } from "./service.ts";
import { UserRepository } from "./user-repository.ts";

/** Organizations, API keys and console users: what the CLI's key and user commands need, and no more. */
export interface IdentityServices {
  identity: IdentityService;
  console: ConsoleService;
}

/**
 * Builds the identity services, with the verified-key cache where every revocation reaches this
 * node: Redis, SQLite's data_version, or PostgreSQL's notifications.
 */
export function createIdentityServices(deps: CoreDeps): IdentityServices {
  const { store, clock, config } = deps;
  // PostgreSQL's own notifications are listened to with Redis too: a CLI run without REDIS_URL, or
  // an operator's SQL, tells no node through Redis.
  const keyChanges = store.listen;
  const authCache =
    config.redisUrl || store.externalChanges || keyChanges
      ? new AuthCache(AUTH_CACHE_TTL_MS, clock, store.externalChanges)
      : undefined;
  const transact = transactor(store.db);
  const identityRepository = new IdentityRepository(store.db, store.dialect);
  const identity = new IdentityService(identityRepository, transact, clock, authCache);
  const consoleService = new ConsoleService(
    new UserRepository(store.db),
    identityRepository,
    identity,
    transact,
    clock,
    publicOrigin(config),
  );
  const storeListen = keyChanges && {
    listen: keyChanges,
    onLost: (error?: unknown) =>
      config.redisUrl
        ? deps.logger.debug(
            { err: error },
            "key changes of writers without Redis unheard until LISTEN is back",
          )
        : deps.logger.warn({ err: error }, "auth cache off until key changes are heard again"),
  };
  authCache
    ?.listen(deps.bus, storeListen, config.redisUrl !== undefined)
    .catch((error: unknown) => deps.logger.warn({ err: error }, "auth cache off"));
  return { identity, console: consoleService };
}
