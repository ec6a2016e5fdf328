import { describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus.ts";
import { AuthCache, KEY_CHANGED_CHANNEL } from "../../src/identity/auth-cache.ts";
import type { AuthContext } from "../../src/identity/service.ts";

const auth: AuthContext = {
  organizationId: "00000000-0000-4000-8000-000000000001",
  userId: 1,
  userUuid: "00000000-0000-4000-8000-000000000002",
  keyId: 7,
  kind: "organization",
  readOnly: false,
  restricted: false,
  billingAccountId: null,
};
const NOW = "2026-11-21T10:00:00.000Z";

/** A clock the test moves by hand. */
function handClock() {
  let now = Date.parse(NOW);
  return {
    now: () => new Date(now),
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe("auth cache", () => {
  it("serves nothing until it listens to key changes", async () => {
    const cache = new AuthCache(60_000, handClock());
    cache.set("hash", auth, null, cache.generation);
    expect(cache.get("hash")).toBeUndefined();
    await cache.listen(new LocalBus());
    cache.set("hash", auth, null, cache.generation);
    expect(cache.get("hash")).toEqual(auth);
  });

  it("drops every entry when a key change is published", async () => {
    const bus = new LocalBus();
    const cache = new AuthCache(60_000, handClock());
    await cache.listen(bus);
    cache.set("hash", auth, null, cache.generation);
    await bus.publish(KEY_CHANGED_CHANNEL, "7");
    expect(cache.get("hash")).toBeUndefined();
  });

  it("does not keep a lookup that was in flight when a key changed", async () => {
    const bus = new LocalBus();
    const cache = new AuthCache(60_000, handClock());
    await cache.listen(bus);
    const generation = cache.generation; // the lookup starts and reads the key as live...
    await bus.publish(KEY_CHANGED_CHANNEL, "7"); // ...the key is revoked meanwhile...
    cache.set("hash", auth, null, generation); // ...and its stale result must not be cached.
    expect(cache.get("hash")).toBeUndefined();
  });

  it("honours the key's expiry and its own time to live", async () => {
    const clock = handClock();
    const cache = new AuthCache(1000, clock);
    await cache.listen(new LocalBus());
    cache.set("expiring", auth, "2026-11-21T10:00:00.500Z", cache.generation);
    expect(cache.get("expiring")).toEqual(auth);
    clock.advance(500);
    expect(cache.get("expiring")).toBeUndefined();
    cache.set("short", auth, null, cache.generation);
    clock.advance(1000);
    expect(cache.get("short")).toEqual(auth);
    clock.advance(1);
    expect(cache.get("short")).toBeUndefined();
  });
});
