import { describe, expect, it } from "vitest";
import { ASK_AGAIN_WHILE_AWAY_MS, LastReads, OUTAGE_GRACE_MS } from "../../src/video/last-reads.ts";

/** PostgreSQL refusing connections, as node-postgres reports it. */
const outage = () =>
  Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
const refused = (): Promise<never> => Promise.reject(outage());

describe("playback's last reads", () => {
  it("serves a read's last answer while the store is away, a not-found one too", async () => {
    const reads = new LastReads(() => 0);
    await reads.read("video a", async () => ({ id: "a", title: "first" }));
    await reads.read("video a", async () => ({ id: "a", title: "renamed" }));
    await reads.read("video gone", async () => undefined);
    await expect(reads.read("video a", refused)).resolves.toEqual({ id: "a", title: "renamed" });
    await expect(reads.read("video gone", refused)).resolves.toBeUndefined();
  });

  it("still fails a read never made, and any failure that is not the store's absence", async () => {
    const reads = new LastReads(() => 0);
    await reads.read("video a", async () => "kept");
    await expect(
      reads.read("video a", () => Promise.reject(new Error("syntax error at or near"))),
    ).rejects.toThrow("syntax error");
    await expect(reads.read("video b", refused)).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });

  it("serves only answers read within the grace before the store last answered, however long the outage", async () => {
    let now = 0;
    const reads = new LastReads(() => now);
    await reads.read("video old", async () => "old");
    now = OUTAGE_GRACE_MS + 1;
    await reads.read("video recent", async () => "recent");
    // The store goes away; an hour later, what was read just before is still served.
    now += 3_600_000;
    await expect(reads.read("video recent", refused)).resolves.toBe("recent");
    await expect(reads.read("video old", refused)).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });

  it("answers from memory at once while the store is away, asking it again once a second", async () => {
    let now = 0;
    const reads = new LastReads(() => now);
    await reads.read("video a", async () => "kept");
    let asked = 0;
    const unreachable = () => {
      asked += 1;
      return refused();
    };
    await expect(reads.read("video a", unreachable)).resolves.toBe("kept");
    now += ASK_AGAIN_WHILE_AWAY_MS / 2;
    await expect(reads.read("video a", unreachable)).resolves.toBe("kept");
    expect(asked).toBe(1);
    now += ASK_AGAIN_WHILE_AWAY_MS;
    await expect(reads.read("video a", async () => "fresh")).resolves.toBe("fresh");
    // Back: every read asks the store again.
    await expect(reads.read("video a", async () => "fresher")).resolves.toBe("fresher");
  });
});
