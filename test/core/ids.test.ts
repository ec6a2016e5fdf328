import { describe, expect, it } from "vitest";
import { isUuid, timeOrderedUuid } from "../../src/ids.ts";

const VERSION_7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("timeOrderedUuid", () => {
  it("is a version 7 UUID (RFC 9562) whose first 48 bits are the time in milliseconds", () => {
    const at = Date.UTC(2026, 10, 27, 1, 2, 3, 456);
    const id = timeOrderedUuid(at);
    expect(id).toMatch(VERSION_7);
    expect(isUuid(id)).toBe(true);
    expect(Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(at);
    expect(timeOrderedUuid(0).startsWith("00000000-0000-7")).toBe(true);
  });

  it("sorts by time, so later rows go to the end of an index", () => {
    const at = Date.UTC(2026, 10, 27);
    const ids = [at + 1, at, at + 1000, at + 999, 2 ** 47].map((time) => timeOrderedUuid(time));
    expect([...ids].sort()).toEqual([ids[1], ids[0], ids[3], ids[2], ids[4]]);
  });

  it("differs within one millisecond (74 random bits)", () => {
    const at = Date.UTC(2026, 10, 27);
    const ids = Array.from({ length: 10_000 }, () => timeOrderedUuid(at));
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids.slice(0, 100)) expect(id).toMatch(VERSION_7);
    // The time part is the same; the rest is not.
    expect(new Set(ids.map((id) => id.slice(0, 14))).size).toBe(1);
    expect(new Set(ids.map((id) => id.slice(15, 18))).size).toBeGreaterThan(1);
  });
});
