import CachePolicy from "http-cache-semantics";
import { describe, expect, it } from "vitest";
import { type CachedObject, EdgeCache } from "../../src/cdn/edge/cache.ts";
import { testStoreKind } from "../support/store.ts";

const object = (text: string): CachedObject => {
  const headers = { "cache-control": "max-age=60" };
  return {
    status: 200,
    headers,
    body: Buffer.from(text),
    policy: new CachePolicy({ url: "/", method: "GET", headers: {} }, { status: 200, headers }),
    freshUntil: Date.now() + 60_000,
    ageAtReceipt: 0,
    receivedAt: Date.now(),
    varies: false,
  };
};

// The cache holds no store: it runs once, with the SQLite pass.
describe.runIf(testStoreKind() === "sqlite")("edge cache bookkeeping", () => {
  it("forgets what it kept for a deleted distribution, purge counts included", () => {
    const cache = new EdgeCache(1024 * 1024);
    for (let n = 0; n < 100; n++) {
      const id = `distribution-${n}`;
      expect(cache.set(id, "/a", {}, object("a"), cache.epoch(id))).toBe(true);
      cache.purge(id, ["/b"]);
    }
    expect(cache.purgeCounts).toBe(100);
    // Deleting each one left its purge count behind for ever: one map entry per distribution made.
    for (let n = 0; n < 100; n++) cache.forgetDistribution(`distribution-${n}`);
    expect(cache.purgeCounts).toBe(0);
    expect(cache.size).toBe(0);

    // A distribution that stays keeps its count: a fetch started before its purge is not stored.
    const kept = "kept";
    const before = cache.epoch(kept);
    cache.dropDistribution(kept);
    expect(cache.set(kept, "/a", {}, object("stale"), before)).toBe(false);
    expect(cache.purgeCounts).toBe(1);
  });
});
