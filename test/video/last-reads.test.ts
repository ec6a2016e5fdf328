import { describe, expect, it, vi } from "vitest";
import {
  ASK_AGAIN_WHILE_AWAY_MS,
  LastReads,
  OUTAGE_GRACE_MS,
  READ_PATIENCE_MS,
} from "../../src/video/last-reads.ts";

/** PostgreSQL refusing connections, as node-postgres reports it. */
const outage = () =>
  Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
const refused = (): Promise<never> => Promise.reject(outage());

describe("playback's last reads", () => {
  it("serves a read's last answer while the store is away, and forgets a read that found nothing", async () => {
    const reads = new LastReads(() => 0);
    await reads.read("video a", async () => ({ id: "a", title: "first" }));
    await reads.read("video a", async () => ({ id: "a", title: "renamed" }));
    await reads.read("video gone", async () => ({ id: "gone" }));
    // Deleted: a later outage must not bring it back.
    await reads.read("video gone", async () => undefined);
    await expect(reads.read("video a", refused)).resolves.toEqual({ id: "a", title: "renamed" });
    await expect(reads.read("video gone", refused)).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });

  it("still fails a read never made, and any failure that is not the store's absence", async () => {
    const reads = new LastReads(() => 0);
    await reads.read("video a", async () => "kept");
    await expect(
      reads.read("video a", () => Promise.reject(new Error("syntax error at or near"))),
    ).rejects.toThrow("syntax error");
    await expect(reads.read("video b", refused)).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });

  // QA of 6 December (session 47): the minute was counted from the node's last playback, so a video
  // made private 80 s before the outage, and not played since, played without a token.
  it("serves only answers read within the grace before this node found the store away, however long the outage", async () => {
    let now = 0;
    const reads = new LastReads(() => now);
    await reads.read("video old", async () => "old");
    now = 50_000;
    await reads.read("video recent", async () => "recent");
    // Found away 80 s after the old read (30 s after the last one).
    now = 50_000 + OUTAGE_GRACE_MS / 2;
    await expect(reads.read("video recent", refused)).resolves.toBe("recent");
    await expect(reads.read("video old", refused)).rejects.toMatchObject({ code: "ECONNREFUSED" });
    now += 3_600_000;
    await expect(reads.read("video recent", refused)).resolves.toBe("recent");
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

  it("keeps no answer for ids that name nothing, so made-up ids cannot push the watched ones out", async () => {
    const reads = new LastReads(() => 0);
    await reads.read("video watched", async () => "watched");
    for (let n = 0; n < 25_000; n += 1) await reads.read(`video made-up-${n}`, async () => undefined);
    await expect(reads.read("video watched", refused)).resolves.toBe("watched");
    // What a video may lack (no uploaded thumbnail) is an answer worth keeping.
    await reads.read("thumbnail watched", async () => undefined, { keepNotFound: true });
    await expect(reads.read("thumbnail watched", refused)).resolves.toBeUndefined();
  });

  // QA of 6 December (session 47): a network cut that leaves the connections open gives no error,
  // and a viewer waited 30 s for each segment.
  it("takes a store silent past its patience for away: the kept answer at once, the store asked again once a second", async () => {
    vi.useFakeTimers();
    try {
      let now = 0;
      const reads = new LastReads(() => now);
      await reads.read("video a", async () => "kept");
      let asked = 0;
      const silent = () => {
        asked += 1;
        return new Promise<string>(() => {});
      };
      const first = reads.read("video a", silent);
      await vi.advanceTimersByTimeAsync(READ_PATIENCE_MS);
      await expect(first).resolves.toBe("kept");
      now += ASK_AGAIN_WHILE_AWAY_MS / 2;
      await expect(reads.read("video a", silent)).resolves.toBe("kept");
      expect(asked).toBe(1);
      // A read with nothing kept waits for the store as before.
      let answered = false;
      void reads.read("video b", silent).then(() => {
        answered = true;
      });
      await vi.advanceTimersByTimeAsync(READ_PATIENCE_MS * 2);
      expect(answered).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });
});
