import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import type { FastifyBaseLogger } from "fastify";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DistributionRepository } from "../../src/cdn/repository.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createMigratedTestStore, type TestStore } from "../support/store.ts";
import { EDGE_ENV, edgeRequest, edgeUrlOf, type Origin, startOrigin } from "./support.ts";

const MEDIA_DOMAIN = "media.cumulo.local";
const EDGE_PUBLIC = "http://edge.cumulo.test:8081";
const API_PUBLIC = "http://api.cumulo.test";
const ENV = { ...EDGE_ENV, CUMULO_EDGE_PUBLIC_URL: EDGE_PUBLIC, CUMULO_PUBLIC_URL: API_PUBLIC };

/** A logger whose warnings the test can read. */
function recordingLogger(): { logger: FastifyBaseLogger; lines: () => { msg: string; hostname?: string }[] } {
  const written: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      written.push(String(chunk));
      callback();
    },
  });
  const logger = pino({ level: "warn", base: undefined }, sink) as FastifyBaseLogger;
  return {
    logger,
    lines: () =>
      written
        .join("")
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line)),
  };
}

describe("host names reserved for the platform", () => {
  let store: TestStore;
  let t: TestApp;
  let attacker: Origin;
  let libraryId: string;
  let videoId: string;
  let attackerKey: string;
  let attackerOrganization: string;

  beforeAll(async () => {
    store = await createMigratedTestStore();
    t = await startTestApp(ENV, { store });
    attacker = await startOrigin();
    attacker.route("/", (_req, res) => res.writeHead(200, { "cache-control": "max-age=60" }).end("attacker"));
    // Organization A: a private library, so its own origin answers a tokenless viewer 403.
    libraryId = (await createLibrary(t, { name: "Victim" })).id;
    videoId = (await createVideo(t, libraryId)).id;
    const secured = await t.request("PUT", `/v1/media/libraries/${libraryId}/security`, {
      json: { video_privacy: "private" },
    });
    expect(secured.status, secured.text).toBe(200);
    ({ key: attackerKey, organizationId: attackerOrganization } = await t.createOrganization("Attacker"));
  });
  afterAll(async () => {
    await t?.close();
    await attacker?.close();
    await store?.drop();
  });

  it("refuses every reserved name at create with validation_format on hostname", async () => {
    const reserved = [
      "127.0.0.1",
      "10.0.0.8",
      "2130706433", // 127.0.0.1 as a browser reads it
      "0x7f.1",
      "localhost",
      "LocalHost",
      "app.localhost",
      "edge.cumulo.test",
      "api.cumulo.test",
      MEDIA_DOMAIN,
      `${randomUUID()}.${MEDIA_DOMAIN}`,
      `x.${MEDIA_DOMAIN}`,
    ];
    for (const hostname of reserved) {
      const created = await t.request("POST", "/v1/cdn/distributions", {
        key: attackerKey,
        json: { hostname, origin_url: `${attacker.url}/` },
      });
      expect(created.status, hostname).toBe(400);
      expect(created.body, hostname).toEqual({
        success: false,
        message: "Invalid Request",
        errors: [{ field: "hostname", code: "validation_format", message: expect.any(String) }],
      });
    }
    // A library's own name is taken as well as reserved: a duplicate, as for any taken name.
    const taken = await t.request("POST", "/v1/cdn/distributions", {
      key: attackerKey,
      json: { hostname: `${libraryId}.${MEDIA_DOMAIN}`, origin_url: `${attacker.url}/` },
    });
    expect(taken.status, taken.text).toBe(409);
    const list = await t.request("GET", "/v1/cdn/distributions", { key: attackerKey });
    expect(list.body.data).toEqual([]);
    // Names that merely look alike stay free.
    for (const hostname of ["localhost.example.com", "media.cumulo.local.example.com", "v1.example.com"]) {
      const created = await t.request("POST", "/v1/cdn/distributions", {
        key: attackerKey,
        json: { hostname, origin_url: `${attacker.url}/` },
      });
      expect(created.status, hostname).toBe(201);
    }
  });

  it("never serves a reserved name an older store holds, and says so at start-up", async () => {
    const edge = () => edgeUrlOf(t);
    const playback = `/${libraryId}.${MEDIA_DOMAIN}/${videoId}/playlist.m3u8`;
    const before = await edgeRequest(edge(), playback);
    expect([before.status, JSON.parse(before.text).error]).toEqual([403, "forbidden"]);

    // Rows as a store written before names were reserved holds them, one per kind of reserved name.
    const repository = new DistributionRepository(t.cumulo.store.db);
    const planted = ["127.0.0.1", "localhost", "edge.cumulo.test", `x.${MEDIA_DOMAIN}`];
    const now = new Date().toISOString();
    for (const hostname of planted) {
      await repository.insert(t.cumulo.store.db, {
        id: randomUUID(),
        organization_id: attackerOrganization,
        hostname,
        origin_url: `${attacker.url}/`,
        default_ttl_s: 3600,
        status: "active",
        library_id: null,
        hostname_token: null,
        hostname_verified_at: now,
        created_at: now,
        updated_at: now,
      });
    }
    await t.close();
    const log = recordingLogger();
    t = await startTestApp(ENV, { store, logger: log.logger });

    const warned = log.lines().filter((line) => line.msg.includes("reserved host name"));
    expect(warned.map((line) => line.hostname).sort()).toEqual([...planted].sort());

    // Path-style playback of A, addressed at the edge by each of its own names: A's origin and rules.
    for (const host of ["127.0.0.1", "localhost", "edge.cumulo.test", `x.${MEDIA_DOMAIN}`, undefined]) {
      const served = await edgeRequest(edge(), playback, host ? { host } : {});
      expect([served.status, JSON.parse(served.text).error], host).toEqual([403, "forbidden"]);
    }
    // Host-style, the library's own name under the media domain still reaches the library.
    const hostStyle = await edgeRequest(edge(), `/${videoId}/playlist.m3u8`, {
      host: `${libraryId}.${MEDIA_DOMAIN}`,
    });
    expect([hostStyle.status, JSON.parse(hostStyle.text).error]).toEqual([403, "forbidden"]);
    // The planted names are not served path-style either.
    for (const hostname of planted) {
      expect((await edgeRequest(edge(), `/${hostname}/`)).status, hostname).toBe(404);
    }
    expect(attacker.hits.size).toBe(0);
  });
});
