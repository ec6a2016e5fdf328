import { systemClock } from "../../src/clock.ts";
import type { InfrastructureDriver } from "../../src/cloud/driver/types.ts";
import { type CloudServices, createCloudServices } from "../../src/cloud/index.ts";
import type { Caller } from "../../src/cloud/locations.ts";
import { loadSecretKey, SecretBox } from "../../src/secret-box.ts";
import type { TestApp } from "../support/app.ts";

/**
 * The cloud services over the test app's store with a driver of the test's own: a server takes no
 * other driver, so tests of what the services ask of the infrastructure call them directly.
 */
export function cloudServicesOver(t: TestApp, driver: InfrastructureDriver): CloudServices {
  return createCloudServices({
    db: t.cumulo.store.db,
    dialect: t.cumulo.store.dialect,
    identity: t.cumulo.services.identity,
    driver,
    secrets: new SecretBox(() => loadSecretKey("driver calls", t.config.dataDir)),
    config: t.config,
    clock: systemClock,
  });
}

/** The test app's admin key as a caller of those services, in the default location. */
export async function adminCaller(t: TestApp, cloud: CloudServices): Promise<Caller> {
  const auth = await t.cumulo.services.identity.authenticate(t.adminKey);
  if (!auth) throw new Error("admin key does not authenticate");
  return cloud.locations.caller(auth, undefined);
}
