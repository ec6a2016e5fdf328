import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestClock } from "../cdn/support.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { webhooksPath } from "../webhooks/helpers.ts";
import { createFolder, createLibrary, createVideo } from "./helpers.ts";

const VTT = "WEBVTT\n\n00:00.000 --> 00:01.000\nHello\n";
// 1x1 PNG
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);

// `updated_at` moves when a record changes. An empty PATCH, or one repeating the stored values, moved
// it on libraries, folders, videos, players, subtitles, CDN distributions and webhook endpoints, as it
// had on cloud resources (QA of 5 December, session 42; docs/decisions.md).
describe("updated_at on a change that changes nothing", () => {
  let t: TestApp;
  const clock = new TestClock(new Date("2026-06-01T10:00:00.000Z"));
  beforeAll(async () => {
    t = await startTestApp(
      { CUMULO_WEBHOOK_ALLOW_PRIVATE: "true", CUMULO_ORIGIN_ALLOW_PRIVATE: "true" },
      { clock },
    );
  });
  afterAll(() => t.close());

  it("stays on every media, CDN and webhook resource, and moves once something changes", async () => {
    const library = (await createLibrary(t, { name: "lib", description: "d" })).id;
    const base = `/v1/media/libraries/${library}`;
    const folder = (await createFolder(t, library, { name: "f" })).id;
    const video = (await createVideo(t, library, { title: "v" })).id;
    const player = (await t.request("POST", `${base}/players`, { json: { name: "p" } })).body.data.id;
    const subtitleForm = (fields: Record<string, string>, withFile = false) => {
      const data = new FormData();
      for (const [name, value] of Object.entries(fields)) data.set(name, value);
      if (withFile) data.set("file", new Blob([VTT]), "en.vtt");
      return data;
    };
    const subtitle = (
      await t.request("POST", `${base}/videos/${video}/subtitles`, {
        body: subtitleForm({ title: "English", language: "en-US" }, true),
      })
    ).body.data.id;
    const distribution = (
      await t.request("POST", "/v1/cdn/distributions", {
        json: { hostname: "updated-at.example.test", origin_url: "http://127.0.0.1:9/base" },
      })
    ).body.data.id;
    const endpoint = (
      await t.request("POST", webhooksPath(library), {
        json: {
          name: "hook",
          url: "http://127.0.0.1:9/hook",
          events: ["ready"],
          headers: { "X-B": "2", "X-A": "1" },
          retry_policy: { max_attempts: 3, initial_delay_s: 10, multiplier: 2, max_delay_s: 100 },
        },
      })
    ).body.data.id;

    const resources: {
      name: string;
      read: string;
      change: (body: Record<string, unknown>) => Promise<{ status: number }>;
      same: Record<string, unknown>;
      changed: Record<string, unknown>;
    }[] = [
      {
        name: "library",
        read: base,
        change: (json) => t.request("PATCH", base, { json }),
        same: { name: "lib", description: "d" },
        changed: { description: "e" },
      },
      {
        name: "library security",
        read: base,
        change: (json) => t.request("PUT", `${base}/security`, { json }),
        same: { referrers: { action: "allow", values: [], enabled: false } },
        changed: { countries: { action: "deny", values: ["FR"] } },
      },
      {
        name: "folder",
        read: `${base}/folders/${folder}`,
        change: (json) => t.request("PATCH", `${base}/folders/${folder}`, { json }),
        same: { name: "f" },
        changed: { name: "g" },
      },
      {
        name: "video",
        read: `${base}/videos/${video}`,
        change: (json) => t.request("PATCH", `${base}/videos/${video}`, { json }),
        same: { title: "v" },
        changed: { title: "w" },
      },
      {
        name: "player",
        read: `${base}/players/${player}`,
        change: (json) => t.request("PATCH", `${base}/players/${player}`, { json }),
        same: { name: "p" },
        changed: { name: "q" },
      },
      {
        name: "player marked default again",
        read: `${base}/players/${player}`,
        change: () => t.request("PATCH", `${base}/players/${player}/mark-as-default`),
        same: {},
        changed: {},
      },
      {
        name: "subtitle",
        read: `${base}/videos/${video}/subtitles/${subtitle}`,
        change: (fields) =>
          t.request("PUT", `${base}/videos/${video}/subtitles/${subtitle}`, {
            body: subtitleForm(fields as Record<string, string>),
          }),
        same: { title: "English", language: "en-US" },
        changed: { title: "British" },
      },
      {
        name: "CDN distribution",
        read: `/v1/cdn/distributions/${distribution}`,
        change: (json) => t.request("PATCH", `/v1/cdn/distributions/${distribution}`, { json }),
        same: { default_ttl_s: 3600, status: "active" },
        changed: { default_ttl_s: 60 },
      },
      {
        name: "webhook endpoint",
        read: `${webhooksPath(library)}/${endpoint}`,
        change: (json) => t.request("PATCH", `${webhooksPath(library)}/${endpoint}`, { json }),
        same: {
          name: "hook",
          events: ["ready"],
          headers: { "X-B": "2", "X-A": "1" },
          // The same policy, its fields in another order.
          retry_policy: { max_delay_s: 100, multiplier: 2, initial_delay_s: 10, max_attempts: 3 },
          is_active: true,
        },
        changed: { is_active: false },
      },
    ];
    for (const resource of resources) {
      const updatedAt = async () => {
        const read = await t.request("GET", resource.read);
        expect(read.status, `${resource.name}: ${read.text}`).toBe(200);
        return read.body.data.updated_at as string;
      };
      const before = await updatedAt();
      clock.advance(60_000);
      expect((await resource.change(resource.same)).status, resource.name).toBeLessThan(300);
      expect(await updatedAt(), resource.name).toBe(before);
      if (Object.keys(resource.changed).length === 0) continue;
      clock.advance(60_000);
      expect((await resource.change(resource.changed)).status, resource.name).toBeLessThan(300);
      expect(await updatedAt(), resource.name).not.toBe(before);
    }

    // A new thumbnail changes the video though its URL stays: browsers fetch it again by updated_at.
    const videoUpdatedAt = async () =>
      (await t.request("GET", `${base}/videos/${video}`)).body.data.updated_at as string;
    const before = await videoUpdatedAt();
    for (let upload = 0; upload < 2; upload++) {
      clock.advance(60_000);
      const thumbnail = new FormData();
      thumbnail.set("file", new Blob([PNG]), "t.png");
      expect(
        (await t.request("POST", `${base}/videos/${video}/thumbnails`, { body: thumbnail })).status,
      ).toBe(200);
    }
    // Each upload moved it, the second one too (its URL was the first one's).
    expect(await videoUpdatedAt()).toBe(clock.now().toISOString());
    expect(before).not.toBe(clock.now().toISOString());
  });
});
