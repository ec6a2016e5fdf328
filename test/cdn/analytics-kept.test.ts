import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { TrafficRepository } from "../../src/cdn/repository.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { writeFromAnotherConnection } from "../support/store.ts";
import {
  createDistribution,
  EDGE_ENV,
  edgeRequest,
  edgeUrlOf,
  type Origin,
  startOrigin,
  TestClock,
  uniqueHost,
} from "./support.ts";

const requestsIn = (body: { Data: { requests: number }[] }): number =>
  body.Data.reduce((total, row) => total + row.requests, 0);

/**
 * An analytics answer's buckets are kept while nothing stored changes (src/cdn/analytics.ts). With the
 * clock frozen every ask covers the same range, so each would be answered from what was kept before
 * if a change were missed.
 */
describe("kept analytics buckets follow every change", () => {
  let t: TestApp;
  let origin: Origin;
  const clock = new TestClock(new Date("2026-03-02T12:30:30.000Z"));
  const hour = Math.floor(clock.now().getTime() / 3_600_000) * 60;

  const requests = async (query: string, key?: string): Promise<number> => {
    const answer = await t.request("GET", `/v1/cdn/analytics?metrics=requests&${query}`, key ? { key } : {});
    expect(answer.status).toBe(200);
    return requestsIn(answer.body);
  };

  /** Traffic counted by another connection of another process, as another edge node's flush would. */
  async function countElsewhere(organizationId: string, count: number): Promise<void> {
    const row = [organizationId, hour, count, 0, 0, 0, 0, count, 0, 0, 0];
    const columns =
      "organization_id, minute, requests, sent_bytes, upstream_bytes, origin_time_ms, origin_fetches, " +
      "responses_2xx, responses_3xx, responses_4xx, responses_5xx";
    if (t.store.databaseUrl) {
      const client = new pg.Client({ connectionString: t.store.databaseUrl });
      await client.connect();
      try {
        const values = row.map((_, index) => `$${index + 1}`).join(", ");
        await client.query(`insert into cdn_organization_traffic_hours (${columns}) values (${values})`, row);
      } finally {
        await client.end();
      }
      return;
    }
    const values = row.map(() => "?").join(", ");
    await writeFromAnotherConnection(t.store.dataDir, (other) =>
      other.prepare(`insert into cdn_organization_traffic_hours (${columns}) values (${values})`).run(...row),
    );
  }

  beforeAll(async () => {
    t = await startTestApp({ ...EDGE_ENV, CUMULO_EDGE_ANALYTICS_FLUSH_MS: "60000" }, { clock });
    origin = await startOrigin();
    origin.route("/object.bin", (_req, res) =>
      res.writeHead(200, { "cache-control": "max-age=600" }).end(Buffer.alloc(100, 1)),
    );
  });
  afterAll(async () => {
    await t.close();
    await origin.close();
  });

  it("counts traffic the edge flushes after the same range was asked for", async () => {
    const host = uniqueHost("kept-edge");
    await createDistribution(t, { hostname: host, origin_url: origin.url });
    for (let ask = 0; ask < 6; ask++) {
      expect(await requests(`distribution=${host}`)).toBe(0);
      expect(await requests("granularity=1h")).toBe(0);
    }

    expect((await edgeRequest(edgeUrlOf(t), `/${host}/object.bin`)).status).toBe(200);
    await t.cumulo.services.cdnTraffic.flush();
    expect(await requests(`distribution=${host}`)).toBe(1);
    expect(await requests("granularity=1h")).toBe(1);
  });

  it("counts traffic another process writes", async () => {
    const other = await t.createOrganization("kept analytics elsewhere");
    expect(await requests("granularity=1h", other.key)).toBe(0);
    expect(await requests("granularity=1h", other.key)).toBe(0);

    await countElsewhere(other.organizationId, 5);
    expect(await requests("granularity=1h", other.key)).toBe(5);
  });

  it("answers each organization for itself and forgets a deleted distribution", async () => {
    const host = uniqueHost("kept-deleted");
    const distribution = await createDistribution(t, { hostname: host, origin_url: origin.url });
    const stranger = await t.createOrganization("kept analytics stranger");
    const path = `/v1/cdn/analytics?distribution=${host}`;
    expect((await t.request("GET", path)).status).toBe(200);
    expect((await t.request("GET", path, { key: stranger.key })).status).toBe(404);
    expect(await requests("granularity=1h", stranger.key)).toBe(0);

    expect((await t.request("DELETE", `/v1/cdn/distributions/${distribution.id}`)).status).toBe(200);
    expect((await t.request("GET", path)).status).toBe(404);
  });
});

describe("kept analytics buckets are read once per change", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  /**
   * Only the API role runs: a worker's own writes (a job or webhook claim that takes something, a
   * cleanup) move PostgreSQL's generation too, which would make the count depend on timing.
   */
  async function storeReadsForAsks(asks: number, env: Record<string, string>): Promise<number> {
    const t = await startTestApp(
      { CUMULO_ROLES: "api", ...env },
      { clock: new TestClock(new Date("2026-03-02T12:30:30.000Z")) },
    );
    try {
      const reads = vi.spyOn(TrafficRepository.prototype, "sumByBucket");
      for (let ask = 0; ask < asks; ask++) {
        expect((await t.request("GET", "/v1/cdn/analytics?granularity=1h")).status).toBe(200);
      }
      // Only this app's repository: with isolation off, another file's app may share this process.
      return reads.mock.contexts.filter(
        (repository) => (repository as TrafficRepository).db === t.cumulo.store.db,
      ).length;
    } finally {
      await t.close();
    }
  }

  it("reads the store for the first ask of a range only, unless CUMULO_KEPT_ANSWERS=false", async () => {
    expect(await storeReadsForAsks(5, {})).toBe(1);
    expect(await storeReadsForAsks(5, { CUMULO_KEPT_ANSWERS: "false" })).toBe(5);
  });
});
