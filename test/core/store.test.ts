import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readBool, readJson, writeJson } from "../../src/store/codec.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

describe(`store values read back identically (${process.env.CUMULO_TEST_STORE ?? "sqlite"})`, () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_ROLES: "api" });
  });
  afterAll(() => t.close());

  it("round-trips booleans, JSON and millisecond timestamps", async () => {
    const { db } = t.cumulo.store;
    const stamp = "2026-11-21T08:30:00.123Z";
    const payload = { nested: { list: [1, "two", null, true] }, unicode: "ünïcødé ✓" };
    await db
      .insertInto("jobs")
      .values({
        id: "6f1b7f5e-2f4e-4a52-9d3c-0d8f8e1b2c3d",
        kind: "roundtrip",
        payload: writeJson(payload) ?? "",
        status: "done",
        run_at: stamp,
        attempts: 0,
        max_attempts: 1,
        locked_until: null,
        last_error: null,
        created_at: stamp,
        updated_at: stamp,
      })
      .execute();
    const job = await db
      .selectFrom("jobs")
      .selectAll()
      .where("kind", "=", "roundtrip")
      .executeTakeFirstOrThrow();
    expect(job.run_at).toBe(stamp);
    expect(job.locked_until).toBeNull();
    expect(readJson(job.payload)).toEqual(payload);

    const keys = await db.selectFrom("api_keys").select(["read_only", "restricted"]).execute();
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) {
      expect(readBool(key.read_only)).toBe(false);
      expect(readBool(key.restricted)).toBe(false);
    }
    const filtered = await db.selectFrom("api_keys").select("id").where("read_only", "=", false).execute();
    expect(filtered.length).toBe(keys.length);
  });

  it("compares timestamps in time order", async () => {
    const { db } = t.cumulo.store;
    const rows = await db
      .selectFrom("jobs")
      .select("id")
      .where("run_at", ">=", "2026-11-21T08:30:00.000Z")
      .where("run_at", "<", "2026-11-21T08:30:00.124Z")
      .execute();
    expect(rows).toHaveLength(1);
  });
});
