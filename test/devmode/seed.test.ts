import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

const ACME_KEY = "acme_seeded_key_0123456789";

describe("seeding a known world", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_DEV_MODE: "true", CUMULO_ORIGIN_ALLOW_PRIVATE: "true" });
  });
  afterAll(() => t.close());

  it("makes organizations, keys, libraries, videos, distributions and cloud resources through the API", async () => {
    const seeded = await t.request("POST", "/_cumulo/state/seed", {
      json: {
        organizations: [
          {
            name: "Acme",
            api_key: ACME_KEY,
            keys: [{ name: "reader", read_only: true }],
            libraries: [{ name: "Main", videos: [{ title: "Intro" }, { title: "Outro" }] }],
            distributions: [{ hostname: "cdn.acme.test", origin_url: "http://127.0.0.1:9" }],
            requests: [{ method: "POST", path: "/v1/storage/disks", body: { size_gb: 10 } }],
          },
        ],
      },
    });
    expect(seeded.status, seeded.text).toBe(200);
    const [acme] = seeded.body.organizations;
    expect(acme.api_key).toBe(ACME_KEY);
    const library = acme.libraries[0];
    const videos = await t.request("GET", `/v1/media/libraries/${library.id}/videos`, { key: ACME_KEY });
    expect(videos.body.data.map((video: { title: string }) => video.title).sort()).toEqual([
      "Intro",
      "Outro",
    ]);
    const reader = acme.keys[0].api_key;
    expect((await t.request("GET", "/v1/media/libraries", { key: reader })).body.data).toHaveLength(1);
    expect(
      (await t.request("POST", "/v1/media/libraries", { key: reader, json: { name: "x" } })).status,
    ).toBe(403);
    const distributions = await t.request("GET", "/v1/cdn/distributions", { key: ACME_KEY });
    expect(distributions.body.data.map((d: { hostname: string }) => d.hostname)).toContain("cdn.acme.test");
    expect(acme.requests).toHaveLength(1);
  });

  it("adds nothing when one call is refused, and says which", async () => {
    const before = await t.request("GET", "/v1/media/libraries");
    const refused = await t.request("POST", "/_cumulo/state/seed", {
      json: {
        organizations: [
          { name: "Half", libraries: [{ name: "Made" }], distributions: [{ hostname: "not a host" }] },
        ],
      },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.message).toContain("organizations[0].distributions[0]");
    const orgs = await t.cumulo.services.identity.listOrganizations();
    expect(orgs.map((org) => org.name)).not.toContain("Half");
    expect((await t.request("GET", "/v1/media/libraries")).body.data).toEqual(before.body.data);

    const reused = await t.request("POST", "/_cumulo/state/seed", {
      json: { organizations: [{ name: "Again", api_key: ACME_KEY }] },
    });
    expect(reused.status).toBe(400);
    expect(reused.body.message).toContain("organizations[0].api_key");
  });
});
