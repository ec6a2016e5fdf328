import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  IDENTITY_TABLES,
  StateRepository,
  TABLES_WITHOUT_OWNER,
} from "../../src/devmode/state-repository.ts";
import { startCumulo } from "../../src/roles.ts";
import { renditionPrefix } from "../../src/video/pipeline.ts";
import { createLibrary } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";
import { uploadSource } from "../video/support.ts";
import { createEndpoint } from "../webhooks/helpers.ts";

interface World {
  key: string;
  libraryId: string;
  videoId: string;
  distributionId: string;
  diskUuid: string;
}

describe("resetting one organization", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_DEV_MODE: "true", CUMULO_DEV_VIDEOS: "instant" });
  });
  afterAll(() => t.close());

  /** A library with a processed video and a webhook endpoint, a distribution and a disk. */
  async function populate(key: string, name: string): Promise<World> {
    const libraryId = (await createLibrary(t, { name }, key)).id;
    const created = await t.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
      key,
      json: { title: `${name} video` },
    });
    const videoId = created.body.data.id;
    await createEndpoint(t, libraryId, { url: "https://hooks.invalid/in" }, key);
    expect(
      (await uploadSource(t, libraryId, videoId, new Uint8Array([1, 2, 3]), "video/mp4", key)).status,
    ).toBe(202);
    const distribution = await t.request("POST", "/v1/cdn/distributions", {
      key,
      json: { hostname: `${name.toLowerCase()}.cdn.invalid`, origin_url: "https://origin.invalid" },
    });
    expect(distribution.status, distribution.text).toBe(201);
    const disk = await t.cloud("POST", "/v1/storage/disks", { key, json: { size_gb: 1 } });
    expect(disk.status, disk.text).toBeLessThan(300);
    return { key, libraryId, videoId, distributionId: distribution.body.data.id, diskUuid: disk.body.uuid };
  }

  const rendition = (world: World) =>
    t.cumulo.services.blobs.exists(`${renditionPrefix(world.libraryId, world.videoId, 1)}/playlist.m3u8`);

  async function expectIntact(world: World) {
    const video = await t.request("GET", `/v1/media/libraries/${world.libraryId}/videos/${world.videoId}`, {
      key: world.key,
    });
    expect(video.body.data.status).toBe("ready");
    expect(await rendition(world)).toBe(true);
    const distribution = await t.request("GET", `/v1/cdn/distributions/${world.distributionId}`, {
      key: world.key,
    });
    expect(distribution.status).toBe(200);
    expect((await t.cloud("GET", `/v1/storage/disks/${world.diskUuid}`, { key: world.key })).status).toBe(
      200,
    );
  }

  it("empties one organization to its bootstrap state, then removes it, leaving the other intact", async () => {
    const other = await t.createOrganization("Reset me");
    const theirs = await populate(other.key, "Theirs");
    const mine = await populate(t.adminKey, "Mine");
    // The first instant video makes the placeholder (ffmpeg, once per data dir): up to a minute on a busy machine.
    for (const world of [theirs, mine]) {
      const status = await waitUntil(
        async () => {
          const path = `/v1/media/libraries/${world.libraryId}/videos/${world.videoId}`;
          const { status } = (await t.request("GET", path, { key: world.key })).body.data;
          return ["ready", "failed"].includes(status) ? status : undefined;
        },
        60_000,
        "the videos processed",
      );
      expect(status).toBe("ready");
    }
    expect(await rendition(theirs)).toBe(true);

    const reset = await t.request("POST", "/_cumulo/state/reset", {
      json: { organization_id: other.organizationId, to: "bootstrap" },
    });
    expect(reset.status, reset.text).toBe(200);
    // Its key still works and finds nothing: no libraries, distributions, disks or files.
    const libraries = await t.request("GET", "/v1/media/libraries", { key: other.key });
    expect(libraries.status).toBe(200);
    expect(libraries.body.data).toEqual([]);
    expect((await t.request("GET", "/v1/cdn/distributions", { key: other.key })).body.data).toEqual([]);
    expect((await t.cloud("GET", `/v1/storage/disks/${theirs.diskUuid}`, { key: other.key })).status).toBe(
      404,
    );
    expect(await rendition(theirs)).toBe(false);
    await expectIntact(mine);

    const removed = await t.request("POST", "/_cumulo/state/reset", {
      json: { organization_id: other.organizationId, to: "empty" },
    });
    expect(removed.status, removed.text).toBe(200);
    expect((await t.request("GET", "/v1/media/libraries", { key: other.key })).status).toBe(401);
    const names = (await t.cumulo.services.identity.listOrganizations()).map((org) => org.name);
    expect(names).not.toContain("Reset me");
    await expectIntact(mine);

    const unknown = await t.request("POST", "/_cumulo/state/reset", {
      json: { organization_id: other.organizationId },
    });
    expect(unknown.status).toBe(404);
    const malformed = await t.request("POST", "/_cumulo/state/reset", { json: { organization_id: "acme" } });
    expect(malformed.status).toBe(400);
  }, 120_000);

  it("refuses the keys of a removed organization at once on another node of the same store", async () => {
    const other = await t.createOrganization("Removed on one node");
    const second = await startCumulo({ ...t.config, port: 0 });
    try {
      const onSecond = () =>
        fetch(`${second.apiUrl}/v1/media/libraries`, { headers: { authorization: `Bearer ${other.key}` } });
      expect((await onSecond()).status).toBe(200);
      const removed = await t.request("POST", "/_cumulo/state/reset", {
        json: { organization_id: other.organizationId, to: "empty" },
      });
      expect(removed.status, removed.text).toBe(200);
      expect((await onSecond()).status).toBe(401);
    } finally {
      await second.close();
    }
  });

  it("knows how every table belongs to an organization (a new table must be placed)", async () => {
    const repository = new StateRepository(t.cumulo.store.db, t.cumulo.store.dialect);
    const owned = new Set(await repository.organizationTables());
    const keys = await repository.foreignKeys();
    const unplaced = (await repository.tables()).filter(
      (table) =>
        !owned.has(table) &&
        !IDENTITY_TABLES.includes(table) &&
        !TABLES_WITHOUT_OWNER.includes(table) &&
        !keys.some((key) => key.child === table && owned.has(key.parent)),
    );
    expect(unplaced).toEqual([]);
  });
});

describe("resetting or loading while requests write", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_DEV_MODE: "true", CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" });
  });
  afterAll(() => t.close());

  /** An organization whose 30 video creations, each delivered to an endpoint that fails, start now. */
  async function busyOrganization(round: number) {
    const org = await t.createOrganization(`Busy ${round}`);
    const libraryId = (await createLibrary(t, { name: "Busy" }, org.key)).id;
    // Nothing listens there: every delivery fails and queues its retry.
    await createEndpoint(t, libraryId, { url: "http://127.0.0.1:9/in" }, org.key);
    const writes = Array.from({ length: 30 }, async (_, i) => {
      await new Promise((resolve) => setTimeout(resolve, i * 3));
      const created = await t.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
        key: org.key,
        json: { title: `busy ${i}` },
      });
      return created.status;
    });
    await new Promise((resolve) => setTimeout(resolve, 20 + round * 5));
    return { org, writes: Promise.all(writes) };
  }

  it("answers 200 while its requests and webhook deliveries write to the same rows", async () => {
    // A test's teardown resets its organization while the test's last calls, and the deliveries they
    // caused, are still being written: on PostgreSQL the two took row locks in opposite orders.
    for (let round = 0; round < 6; round++) {
      const { org, writes } = await busyOrganization(round);
      const reset = await t.request("POST", "/_cumulo/state/reset", {
        json: { organization_id: org.organizationId, to: round % 2 ? "empty" : "bootstrap" },
      });
      expect(reset.status, reset.text).toBe(200);
      // Before the reset: created; after: the library (or the key) is gone.
      for (const status of await writes) expect([201, 401, 404]).toContain(status);
    }
  }, 90_000);

  it("resets the whole store or loads a snapshot, answering 200, while requests write", async () => {
    expect((await t.request("PUT", "/_cumulo/state/snapshots/busy")).status).toBe(200);
    for (let round = 0; round < 4; round++) {
      const { writes } = await busyOrganization(round);
      const swapped =
        round % 2
          ? await t.request("POST", "/_cumulo/state/reset", { json: {} })
          : await t.request("POST", "/_cumulo/state/snapshots/busy/load");
      expect(swapped.status, swapped.text).toBe(200);
      // The writes' own answers are not this test's: one that read its library before the swap and
      // wrote after it can meet the emptied table.
      await writes;
    }
  }, 90_000);
});
