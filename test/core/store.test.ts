import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readBool, readJson, writeJson } from "../../src/store/codec.ts";
import { transactor } from "../../src/store/transactions.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

describe(`store values read back identically (${process.env.CUMULO_TEST_STORE ?? "sqlite"})`, () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_ROLES: "api" });
  });
  afterAll(() => t.close());

  /** A finished job row: the table every store has, with plain columns of each kind. */
  const insertJob = (job: { id: string; kind: string; payload: string; stamp: string }) =>
    t.cumulo.store.db
      .insertInto("jobs")
      .values({
        id: job.id,
        kind: job.kind,
        payload: job.payload,
        status: "done",
        run_at: job.stamp,
        attempts: 0,
        max_attempts: 1,
        locked_until: null,
        last_error: null,
        created_at: job.stamp,
        updated_at: job.stamp,
      })
      .execute();

  it("round-trips booleans, JSON and millisecond timestamps", async () => {
    const { db } = t.cumulo.store;
    const stamp = "2026-11-21T08:30:00.123Z";
    const payload = { nested: { list: [1, "two", null, true] }, unicode: "ünïcødé ✓" };
    await insertJob({
      id: "6f1b7f5e-2f4e-4a52-9d3c-0d8f8e1b2c3d",
      kind: "roundtrip",
      payload: writeJson(payload) ?? "",
      stamp,
    });
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

  it.skipIf(process.env.CUMULO_TEST_STORE !== "postgres")(
    "runs again a transaction PostgreSQL ended to break a deadlock, so both writes succeed",
    async () => {
      const { db } = t.cumulo.store;
      const transact = transactor(db);
      const stamp = "2026-11-21T09:00:00.000Z";
      const ids = ["7a1b7f5e-2f4e-4a52-9d3c-0d8f8e1b2c01", "7a1b7f5e-2f4e-4a52-9d3c-0d8f8e1b2c02"];
      for (const id of ids) await insertJob({ id, kind: "deadlock", payload: "{}", stamp });
      // Each transaction locks one row, waits until the other holds its own, then asks for the
      // other's: a cycle PostgreSQL breaks by ending one of them. Only first tries wait.
      let arrived = 0;
      let bothHold: () => void = () => undefined;
      const holding = new Promise<void>((resolve) => {
        bothHold = resolve;
      });
      const crossing = (first: string, second: string) =>
        transact(async (trx) => {
          const bump = (id: string) =>
            trx
              .updateTable("jobs")
              .set((eb) => ({ attempts: eb("attempts", "+", 1) }))
              .where("id", "=", id)
              .execute();
          await bump(first);
          arrived += 1;
          if (arrived === 2) bothHold();
          if (arrived <= 2) await holding;
          await bump(second);
        });
      await Promise.all([crossing(ids[0] ?? "", ids[1] ?? ""), crossing(ids[1] ?? "", ids[0] ?? "")]);
      const rows = await db.selectFrom("jobs").select("attempts").where("kind", "=", "deadlock").execute();
      expect(rows.map((row) => row.attempts)).toEqual([2, 2]);
    },
  );
});
