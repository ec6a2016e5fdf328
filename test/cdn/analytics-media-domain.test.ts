import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { EDGE_ENV, edgeRequest, edgeUrlOf } from "./support.ts";

describe("CDN analytics of a library after CUMULO_MEDIA_DOMAIN changed", () => {
  let t: TestApp;
  let renamed: TestApp;

  beforeAll(async () => {
    t = await startTestApp(EDGE_ENV);
    // A second node on the same store, as after a restart with the new setting.
    renamed = await startTestApp({ ...EDGE_ENV, CUMULO_MEDIA_DOMAIN: "renamed.example" }, { store: t.store });
  });
  afterAll(async () => {
    await renamed?.close();
    await t?.close();
  });

  it("answers for the library's name under the new domain, as its video URLs and the edge give it", async () => {
    const library = await createLibrary(t);
    const other = await t.createOrganization("media domain other");
    const newName = `${library.id}.renamed.example`;
    const viewed = await edgeRequest(edgeUrlOf(renamed), `/${newName}/no-such-video/playlist.m3u8`);
    expect(viewed.status).toBe(404);
    await renamed.cumulo.services.cdnTraffic.flush();

    const query = `/v1/cdn/analytics?granularity=1d&metrics=requests,responses_4xx&distribution=${newName}`;
    const analytics = await renamed.request("GET", query);
    expect(analytics.status, analytics.text).toBe(200);
    expect(analytics.body.Distribution).toBe(newName);
    const total = (metric: string) =>
      analytics.body.Data.reduce((sum: number, row: Record<string, number>) => sum + row[metric], 0);
    expect([total("requests"), total("responses_4xx")]).toEqual([1, 1]);
    // Still another organization's library: not found for them.
    expect((await renamed.request("GET", query, { key: other.key })).status).toBe(404);
  });
});
