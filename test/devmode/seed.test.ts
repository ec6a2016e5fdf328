import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify as toYaml } from "yaml";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";

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

  it("describes what it made in /openapi.json, so the typed client reads ids and keys", async () => {
    const document = (await t.request("GET", "/openapi.json")).body;
    const answer =
      document.paths["/_cumulo/state/seed"].post.responses["200"].content["application/json"].schema;
    const organization = answer.properties.organizations.items;
    expect(organization.required).toEqual(
      expect.arrayContaining(["id", "name", "api_key", "keys", "libraries", "distributions", "cloud"]),
    );
    expect(organization.properties.keys.items.required).toEqual(["id", "name", "api_key"]);
    const library = organization.properties.libraries.items;
    expect(library.required).toEqual(expect.arrayContaining(["id", "distribution_id", "videos"]));
    expect(library.properties.videos.items.required).toEqual(expect.arrayContaining(["id", "status"]));
    expect(Object.keys(organization.properties.cloud.properties)).toEqual([
      "vms",
      "disks",
      "floating_ips",
      "load_balancers",
    ]);
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
    // The refused call's field errors, named from the seed's root.
    expect(refused.body.errors).toContainEqual(
      expect.objectContaining({
        field: "organizations.0.distributions.0.hostname",
        code: "validation_format",
      }),
    );
    const orgs = await t.cumulo.services.identity.listOrganizations();
    expect(orgs.map((org) => org.name)).not.toContain("Half");
    expect((await t.request("GET", "/v1/media/libraries")).body.data).toEqual(before.body.data);

    // A request's path stays under /v1/: a dot segment (`/v1/../_cumulo/...`) passed the prefix.
    for (const path of ["/v1/../_cumulo/state/reset", "/v1/%2e%2e/_cumulo/state/reset", "/v1/a/./b"]) {
      const dotted = await t.request("POST", "/_cumulo/state/seed", {
        json: { organizations: [{ name: "Dots", requests: [{ method: "POST", path }] }] },
      });
      expect([dotted.status, dotted.body.errors?.[0]?.field], path).toEqual([
        400,
        "organizations.0.requests.0.path",
      ]);
    }

    // Names follow the API's rules: not blank, and a key's at most 100 characters.
    for (const [organization, field] of [
      [{ name: "  " }, "organizations.0.name"],
      [{ name: "Keys", keys: [{ name: "\t" }] }, "organizations.0.keys.0.name"],
      [{ name: "Keys", keys: [{ name: "k".repeat(101) }] }, "organizations.0.keys.0.name"],
    ] as const) {
      const named = await t.request("POST", "/_cumulo/state/seed", {
        json: { organizations: [organization] },
      });
      expect([named.status, named.body.errors?.[0]?.field], named.text).toEqual([400, field]);
    }
    expect((await t.cumulo.services.identity.listOrganizations()).map((org) => org.name)).not.toContain(
      "Keys",
    );

    const reused = await t.request("POST", "/_cumulo/state/seed", {
      json: { organizations: [{ name: "Again", api_key: ACME_KEY }] },
    });
    expect(reused.status).toBe(400);
    expect(reused.body.message).toContain("organizations[0].api_key");
  });

  /** A world with something of every kind, cloud resources named by kind. */
  const WORLD = {
    organizations: [
      {
        name: "Yamlco",
        api_key: "yamlco_seeded_key_0123456789",
        keys: [{ name: "reader", read_only: true }],
        libraries: [{ name: "Films", description: "from a seed", videos: [{ title: "One" }] }],
        distributions: [{ hostname: "cdn.yamlco.test", origin_url: "http://127.0.0.1:9" }],
        cloud: { vms: [{ name: "web" }], disks: [{ size_gb: 5 }], floating_ips: [{ name: "front" }] },
      },
      { name: "Second", libraries: [{ name: "Other" }] },
    ],
  };

  /** What a seed made, without what differs between two runs (ids, keys, times, addresses, makers). */
  const shape = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(shape);
    if (value && typeof value === "object") {
      return Object.fromEntries(
        Object.entries(value)
          .filter(
            ([name]) =>
              !/(^|_)(id|uuid|key|at|address|ip|hostname|url|name_server|by|mac|billing_account)s?$/.test(
                name,
              ),
          )
          .map(([name, inner]) => [name, shape(inner)]),
      );
    }
    return value;
  };

  it("sends each request of a seed with the credential header its route takes", async () => {
    const key = "requests_seeded_key_0123456789";
    const seeded = await t.request("POST", "/_cumulo/state/seed", {
      json: {
        organizations: [
          {
            name: "Requests",
            api_key: key,
            requests: [
              { method: "POST", path: "/v1/organization/api-keys", body: { name: "deploy" } },
              { method: "POST", path: "/v1/storage/user/keys" },
              { method: "POST", path: "/v1/cloud/local-1/storage/disks", body: { size_gb: 3 } },
              { method: "POST", path: "/v1/media/libraries", body: { name: "By request" } },
            ],
          },
        ],
      },
    });
    expect(seeded.status, seeded.text).toBe(200);
    const keys = await t.request("GET", "/v1/organization/api-keys", { key });
    expect(keys.body.data.map((made: { name: string }) => made.name)).toContain("deploy");
    expect((await t.cloud("GET", "/v1/storage/disks", { key })).body).toHaveLength(1);
  });

  it("answers every cloud kind the seed names, an empty one as an empty list", async () => {
    const seeded = await t.request("POST", "/_cumulo/state/seed", {
      json: { organizations: [{ name: "Lists", cloud: { disks: [{ size_gb: 1 }], load_balancers: [] } }] },
    });
    expect(seeded.status, seeded.text).toBe(200);
    const { cloud } = seeded.body.organizations[0];
    expect(Object.keys(cloud).sort()).toEqual(["disks", "load_balancers"]);
    expect(cloud.load_balancers).toEqual([]);
  });

  it("reads the same world from YAML as from JSON, cloud resources included", async () => {
    const fromJson = await t.request("POST", "/_cumulo/state/seed", { json: WORLD });
    expect(fromJson.status, fromJson.text).toBe(200);
    const [yamlco] = fromJson.body.organizations;
    expect(Object.keys(yamlco.cloud).sort()).toEqual(["disks", "floating_ips", "vms"]);
    const disks = await t.cloud("GET", "/v1/storage/disks", { key: WORLD.organizations[0]?.api_key });
    expect(disks.status, disks.text).toBe(200);
    expect(JSON.stringify(disks.body)).toContain(yamlco.cloud.disks[0].uuid);
    expect((await t.request("POST", "/_cumulo/state/reset", { json: {} })).status).toBe(200);

    const yaml = toYaml(WORLD);
    expect(yaml).not.toContain("{");
    const fromYaml = await t.request("POST", "/_cumulo/state/seed", {
      body: yaml,
      headers: { "content-type": "application/yaml" },
    });
    expect(fromYaml.status, fromYaml.text).toBe(200);
    expect(shape(fromYaml.body)).toEqual(shape(fromJson.body));
    expect(fromYaml.body.organizations[0].api_key).toBe(WORLD.organizations[0]?.api_key);

    const broken = await t.request("POST", "/_cumulo/state/seed", {
      body: "organizations: [unclosed",
      headers: { "content-type": "text/yaml" },
    });
    expect(broken.status).toBe(400);
    expect(broken.body.message).toContain("not valid YAML");
    const wrongShape = await t.request("POST", "/_cumulo/state/seed", {
      body: "organizations:\n  - title: no name\n",
      headers: { "content-type": "application/yaml" },
    });
    expect(wrongShape.status).toBe(400);
    // Nesting is bounded as for JSON (CUMULO_MAX_JSON_DEPTH, 64 by default), also past the parser's stack.
    for (const depth of [100, 5000]) {
      const deep = await t.request("POST", "/_cumulo/state/seed", {
        body: `organizations: ${"[".repeat(depth)}${"]".repeat(depth)}`,
        headers: { "content-type": "text/yaml" },
      });
      expect(deep.status, String(depth)).toBe(400);
      expect(deep.body, String(depth)).toEqual({ success: false, message: "Invalid Request" });
    }
  });

  it("uploads the placeholder MP4 as a seeded video's source, which real processing takes", async () => {
    const seeded = await t.request("POST", "/_cumulo/state/seed", {
      json: {
        organizations: [
          {
            name: "With a video",
            libraries: [{ name: "Played", videos: [{ title: "Ready soon", source: "placeholder" }] }],
          },
        ],
      },
    });
    expect(seeded.status, seeded.text).toBe(200);
    const [organization] = seeded.body.organizations;
    const library = organization.libraries[0];
    const video = library.videos[0];
    expect(video).toMatchObject({ title: "Ready soon", status: "uploading" });
    const path = `/v1/media/libraries/${library.id}/videos/${video.id}`;
    const done = await waitUntil(
      async () => {
        const answer = await t.request("GET", path, { key: organization.api_key });
        return ["ready", "failed"].includes(answer.body.data.status) ? answer.body.data : undefined;
      },
      60_000,
      "the seeded video processed",
    );
    expect(done).toMatchObject({ status: "ready", duration: 2 });
  }, 90_000);
});

describe("seeding more than the request budget", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_DEV_MODE: "true", CUMULO_RATE_LIMIT: "5/60s" });
  });
  afterAll(() => t.close());

  it("makes the whole world and leaves the seeded key its full budget", async () => {
    const key = "budget_seeded_key_0123456789";
    const seeded = await t.request("POST", "/_cumulo/state/seed", {
      json: {
        organizations: [
          {
            name: "Many disks",
            api_key: key,
            libraries: [{ name: "One", videos: [{ title: "a" }, { title: "b" }] }],
            cloud: { disks: Array.from({ length: 8 }, () => ({ size_gb: 1 })) },
          },
        ],
      },
    });
    expect(seeded.status, seeded.text).toBe(200);
    expect(seeded.body.organizations[0].cloud.disks).toHaveLength(8);
    const disks = await t.cloud("GET", "/v1/storage/disks", { key });
    expect(disks.status).toBe(200);
    expect(disks.body).toHaveLength(8);
    // The seed's calls went through the API as this key, but were not counted against it.
    expect(disks.headers.get("ratelimit-remaining")).toBe("4");
    // A client that sends the marking header with a value of its own is counted as usual.
    for (let sent = 2; sent <= 5; sent++) {
      const counted = await t.cloud("GET", "/v1/storage/disks", {
        key,
        headers: { "x-cumulo-self-request": "guessed" },
      });
      expect(counted.status).toBe(200);
    }
    const refused = await t.cloud("GET", "/v1/storage/disks", {
      key,
      headers: { "x-cumulo-self-request": "guessed" },
    });
    expect(refused.status).toBe(429);
  });
});

describe("a refused seed beside another worker's calls", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_DEV_MODE: "true" });
  });
  afterAll(() => t.close());

  it("takes back only what it made: another organization's writes meanwhile stay", async () => {
    const worker = await t.createOrganization("Other worker");
    const seeding = t.request("POST", "/_cumulo/state/seed", {
      json: {
        organizations: [
          // The first placeholder is made by ffmpeg (seconds): the seed is under way meanwhile.
          { name: "Seeding", libraries: [{ name: "Slow", videos: [{ title: "v", source: "placeholder" }] }] },
          { name: "Refused", distributions: [{ hostname: "not a host" }] },
        ],
      },
    });
    const { identity } = t.cumulo.services;
    await waitUntil(async () =>
      (await identity.listOrganizations()).some((org) => org.name === "Seeding") ? true : undefined,
    );
    const made = await t.request("POST", "/v1/media/libraries", {
      key: worker.key,
      json: { name: "Made meanwhile" },
    });
    expect(made.status, made.text).toBe(201);

    const refused = await seeding;
    expect(refused.status, refused.text).toBe(400);
    expect(refused.body.message).toContain("organizations[1].distributions[0]");
    const names = (await identity.listOrganizations()).map((org) => org.name);
    expect(names).toContain("Other worker");
    expect(names).not.toContain("Seeding");
    expect(names).not.toContain("Refused");
    const kept = await t.request("GET", `/v1/media/libraries/${made.body.data.id}`, { key: worker.key });
    expect(kept.status, kept.text).toBe(200);
  }, 60_000);
});
