import { copyFileSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Reader } from "mmdb-lib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { edgeUrlOf } from "../cdn/support.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";

/*
 * Country rules with a GeoIP database (test/fixtures/geoip/make.pl wrote it): 127.0.0.0/8 is DE,
 * 203.0.113.0/24 and 2001:db8::/32 FR, 198.51.100.0/24 US, 100.64.0.0/10 registered in NL only.
 * The app trusts 127.0.0.1 as its proxy; a client connecting from 127.0.0.2 is a viewer reaching the
 * listeners directly.
 */
const FIXTURES = join(import.meta.dirname, "../fixtures/geoip");
const METRICS_TOKEN = "geoip-metrics-token-0123456789";
const PROXY = "127.0.0.1";
const VIEWER = "127.0.0.2";

// 1x1 PNG
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);

/** A GET from the given local address; the status only. */
function get(url: string, from: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { localAddress: from, headers, agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("country rules with a GeoIP database", () => {
  let t: TestApp;
  let work: string;
  let database: string;
  let libraryId: string;
  let thumbnail: string;
  let embed: string;
  const setCountries = async (countries: Record<string, unknown>) => {
    const updated = await t.request("PUT", `/v1/media/libraries/${libraryId}/security`, {
      json: { countries },
    });
    expect(updated.status).toBe(200);
  };

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cumulo-geoip-"));
    database = join(work, "countries.mmdb");
    copyFileSync(join(FIXTURES, "countries.mmdb"), database);
    t = await startTestApp({
      CUMULO_EDGE_PORT: "0",
      CUMULO_GEOIP_DATABASE: database,
      CUMULO_GEOIP_RECHECK_MS: "100",
      CUMULO_TRUST_PROXY: PROXY,
      CUMULO_METRICS_TOKEN: METRICS_TOKEN,
    });
    libraryId = (await createLibrary(t)).id;
    const video = await createVideo(t, libraryId);
    // A video with an uploaded thumbnail plays it before any processing: 200 when admitted.
    const form = new FormData();
    form.set("file", new Blob([PNG]), "a.png");
    const uploaded = await t.request(
      "POST",
      `/v1/media/libraries/${libraryId}/videos/${video.id}/thumbnails`,
      {
        body: form,
      },
    );
    expect(uploaded.status).toBe(200);
    thumbnail = `${edgeUrlOf(t)}/${libraryId}.media.cumulo.local/${video.id}/thumbnail.jpg`;
    // The embed page admits before it finds the video not ready: 404 when admitted, 403 when refused.
    embed = `${t.baseUrl}/embed/${libraryId}/${video.id}`;
  });
  afterAll(async () => {
    await t?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("looks up a viewer's own address and ignores the country headers the viewer sends", async () => {
    await setCountries({ action: "deny", values: ["DE"], enabled: true });
    expect(await get(thumbnail, VIEWER)).toBe(403);
    expect(await get(thumbnail, VIEWER, { "cf-ipcountry": "FR" })).toBe(403);
    expect(await get(thumbnail, VIEWER, { "x-viewer-country": "FR" })).toBe(403);
    // Nor is a viewer's own X-Forwarded-For believed.
    expect(await get(thumbnail, VIEWER, { "x-forwarded-for": "203.0.113.9" })).toBe(403);
    expect(await get(embed, VIEWER, { "x-viewer-country": "FR" })).toBe(403);

    await setCountries({ action: "allow", values: ["FR"], enabled: true });
    expect(await get(thumbnail, VIEWER, { "cf-ipcountry": "FR" })).toBe(403);
    expect(await get(embed, VIEWER)).toBe(403);
  });

  it("behind a trusted proxy, looks up the address it forwards, or keeps the country it names", async () => {
    await setCountries({ action: "allow", values: ["FR"], enabled: true });
    expect(await get(thumbnail, PROXY, { "x-forwarded-for": "203.0.113.9" })).toBe(200);
    expect(await get(thumbnail, PROXY, { "x-forwarded-for": "2001:db8::7" })).toBe(200);
    expect(await get(thumbnail, PROXY, { "x-forwarded-for": "198.51.100.4" })).toBe(403);
    // The proxy itself is in DE.
    expect(await get(thumbnail, PROXY)).toBe(403);
    // A trusted proxy's country header wins over the database.
    expect(await get(thumbnail, PROXY, { "x-forwarded-for": "198.51.100.4", "cf-ipcountry": "fr" })).toBe(
      200,
    );
    expect(await get(embed, PROXY, { "x-forwarded-for": "203.0.113.9" })).toBe(404);
    expect(await get(embed, PROXY, { "x-forwarded-for": "198.51.100.4" })).toBe(403);
  });

  it("treats an address the database does not place as no known country", async () => {
    await setCountries({ action: "allow", values: ["FR"], enabled: true });
    expect(await get(thumbnail, PROXY, { "x-forwarded-for": "192.0.2.1" })).toBe(403);
    expect(await get(thumbnail, PROXY, { "x-forwarded-for": "not-an-address" })).toBe(403);
    await setCountries({ action: "deny", values: ["DE"], enabled: true });
    expect(await get(thumbnail, PROXY, { "x-forwarded-for": "192.0.2.1" })).toBe(200);
    expect(await get(thumbnail, PROXY, { "x-forwarded-for": "127.0.0.9, not-an-address" })).toBe(200);
    // A range known only by the country it is registered in is placed there.
    await setCountries({ action: "deny", values: ["NL"], enabled: true });
    expect(await get(thumbnail, PROXY, { "x-forwarded-for": "100.64.1.1" })).toBe(403);
    expect(await get(thumbnail, PROXY, { "x-forwarded-for": "192.0.2.1" })).toBe(200);
  });

  it("reports the database's build time in /metrics", async () => {
    const scrape = await t.request("GET", "/metrics", {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    const built = new Reader(readFileSync(database)).metadata.buildEpoch.getTime() / 1000;
    expect(scrape.text).toMatch(
      new RegExp(`^cumulo_geoip_database_build_timestamp_seconds ${Math.floor(built)}$`, "m"),
    );
  });

  it("reads a newer copy renamed into place, and keeps the last good one when a copy is broken", async () => {
    await setCountries({ action: "allow", values: ["FR"], enabled: true });
    expect(await get(thumbnail, VIEWER)).toBe(403);
    const next = join(work, "countries.mmdb.new");
    copyFileSync(join(FIXTURES, "countries-updated.mmdb"), next);
    renameSync(next, database);
    // In the newer copy, loopback is in FR.
    await waitUntil(async () => (await get(thumbnail, VIEWER)) === 200, 10_000, "the newer GeoIP copy");

    writeFileSync(next, "not a MaxMind database");
    renameSync(next, database);
    // Several recheck intervals go by; the copy read before keeps answering.
    for (let round = 0; round < 5; round++) {
      expect(await get(thumbnail, VIEWER)).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    copyFileSync(join(FIXTURES, "countries.mmdb"), next);
    renameSync(next, database);
    await waitUntil(async () => (await get(thumbnail, VIEWER)) === 403, 10_000, "the newer GeoIP copy");
  });
});

describe("a GeoIP database that cannot be read", () => {
  it("stops start-up with the setting's name", async () => {
    const work = mkdtempSync(join(tmpdir(), "cumulo-geoip-bad-"));
    try {
      await expect(startTestApp({ CUMULO_GEOIP_DATABASE: join(work, "missing.mmdb") })).rejects.toThrow(
        /CUMULO_GEOIP_DATABASE.*missing\.mmdb.*ENOENT/,
      );
      const text = join(work, "countries.mmdb");
      writeFileSync(text, "not a MaxMind database");
      await expect(startTestApp({ CUMULO_GEOIP_DATABASE: text })).rejects.toThrow(/CUMULO_GEOIP_DATABASE/);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
});
