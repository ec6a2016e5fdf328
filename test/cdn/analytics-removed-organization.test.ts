import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import {
  createDistribution,
  EDGE_ENV,
  edgeRequest,
  edgeUrlOf,
  type Origin,
  startOrigin,
  uniqueHost,
} from "./support.ts";

describe("CDN traffic counted in memory when the store is reset or loaded", () => {
  let t: TestApp;
  let origin: Origin;

  beforeAll(async () => {
    t = await startTestApp({ ...EDGE_ENV, CUMULO_DEV_MODE: "true", CUMULO_EDGE_ANALYTICS_FLUSH_MS: "60000" });
    origin = await startOrigin();
    origin.route("/object.bin", (_req, res) => res.writeHead(200).end(Buffer.alloc(100, 1)));
  });
  afterAll(async () => {
    await t?.close();
    await origin?.close();
  });

  it("is dropped; everyone else's counts of the same flush are written", async () => {
    const ownHost = uniqueHost("kept");
    await createDistribution(t, { hostname: ownHost, origin_url: origin.url });
    const removed = await t.createOrganization("removed before the flush");
    const removedHost = uniqueHost("removed");
    await createDistribution(t, { hostname: removedHost, origin_url: origin.url }, removed.key);
    const edge = edgeUrlOf(t);
    expect((await edgeRequest(edge, `/${removedHost}/object.bin`)).status).toBe(200);
    expect((await edgeRequest(edge, `/${ownHost}/object.bin`)).status).toBe(200);
    const reset = await t.request("POST", "/_cumulo/state/reset", {
      json: { organization_id: removed.organizationId, to: "empty" },
    });
    expect(reset.status, reset.text).toBe(200);
    await t.cumulo.services.cdnTraffic.flush();

    const analytics = await t.request(
      "GET",
      `/v1/cdn/analytics?granularity=1d&metrics=requests,traffic&distribution=${ownHost}`,
    );
    expect(analytics.status, analytics.text).toBe(200);
    const total = (metric: string) =>
      analytics.body.Data.reduce((sum: number, row: Record<string, number>) => sum + row[metric], 0);
    expect([total("requests"), total("traffic")]).toEqual([1, 100]);
  });

  const requestsToday = async () => {
    const analytics = await t.request("GET", "/v1/cdn/analytics?granularity=1d&metrics=requests");
    expect(analytics.status, analytics.text).toBe(200);
    return analytics.body.Data.reduce((sum: number, row: { requests: number }) => sum + row.requests, 0);
  };

  /** Serves one request through a new distribution of the bootstrap organization; its count stays in memory. */
  const serveOne = async (label: string) => {
    const host = uniqueHost(label);
    await createDistribution(t, { hostname: host, origin_url: origin.url });
    expect((await edgeRequest(edgeUrlOf(t), `/${host}/object.bin`)).status).toBe(200);
  };

  it("is dropped when served before a reset of the store; traffic after it is counted", async () => {
    await serveOne("before-reset");
    const reset = await t.request("POST", "/_cumulo/state/reset", { json: { to: "bootstrap" } });
    expect(reset.status, reset.text).toBe(200);
    await t.cumulo.services.cdnTraffic.flush();
    expect(await requestsToday()).toBe(0);

    await serveOne("after-reset");
    await t.cumulo.services.cdnTraffic.flush();
    expect(await requestsToday()).toBe(1);
  });

  it("is dropped when served before a snapshot load", async () => {
    expect((await t.request("POST", "/_cumulo/state/reset", { json: {} })).status).toBe(200);
    expect((await t.request("PUT", "/_cumulo/state/snapshots/no_traffic")).status).toBe(200);
    await serveOne("before-load");
    expect((await t.request("POST", "/_cumulo/state/snapshots/no_traffic/load")).status).toBe(200);
    await t.cumulo.services.cdnTraffic.flush();
    expect(await requestsToday()).toBe(0);
  });
});
