import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import CachePolicy from "http-cache-semantics";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CachedObject } from "../../src/cdn/edge/cache.ts";
import { DiskTier } from "../../src/cdn/edge/disk-tier.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { mountTmpfs, NO_TMPFS, unmountTmpfs } from "../support/tmpfs.ts";
import {
  createDistribution,
  EDGE_ENV,
  edgeRequest,
  edgeUrlOf,
  type Origin,
  startOrigin,
  uniqueHost,
} from "./support.ts";

const OBJECT_BYTES = 4000;

/** Every file the disk tiers under a data dir hold (one directory per process). */
const diskFiles = (dataDir: string): string[] => {
  const root = join(dataDir, "edge-cache");
  return existsSync(root)
    ? readdirSync(root).flatMap((dir) => readdirSync(join(root, dir)).map((file) => join(root, dir, file)))
    : [];
};

/** Eviction to disk is written in the background; wait until the files are there. */
const waitForDiskFiles = async (dataDir: string, count: number): Promise<string[]> => {
  for (let i = 0; i < 100 && diskFiles(dataDir).length < count; i++)
    await new Promise((resolve) => setTimeout(resolve, 20));
  const files = diskFiles(dataDir);
  expect(files.length).toBeGreaterThanOrEqual(count);
  return files;
};

describe("CDN edge disk tier", () => {
  let t: TestApp;
  let origin: Origin;
  let edge: string;
  let host: string;
  let distributionId: string;
  const get = (path: string) => edgeRequest(edge, `/${host}${path}`, {});

  beforeAll(async () => {
    // Memory holds about two objects; the disk holds many.
    t = await startTestApp({
      ...EDGE_ENV,
      CUMULO_EDGE_CACHE_BYTES: String(2 * OBJECT_BYTES + 2000),
      CUMULO_EDGE_DISK_CACHE_BYTES: String(100 * OBJECT_BYTES),
    });
    edge = edgeUrlOf(t);
    origin = await startOrigin();
    host = uniqueHost("disk");
    distributionId = (await createDistribution(t, { hostname: host, origin_url: origin.url })).id;
    for (const name of ["a", "b", "c", "d", "e"]) {
      origin.route(`/${name}.bin`, (_req, res) => {
        res.writeHead(200, { "content-type": "application/octet-stream", "cache-control": "max-age=300" });
        res.end(Buffer.alloc(OBJECT_BYTES, name));
      });
    }
  });
  afterAll(async () => {
    await t.close();
    await origin.close();
  });

  it("keeps objects evicted from memory on disk and serves them as hits without the origin", async () => {
    for (const name of ["a", "b", "c", "d", "e"])
      expect((await get(`/${name}.bin`)).headers["x-cache"]).toBe("MISS");
    await waitForDiskFiles(t.store.dataDir, 3);
    const again = await get("/a.bin");
    expect(again.headers["x-cache"]).toBe("HIT");
    expect(again.body.equals(Buffer.alloc(OBJECT_BYTES, "a"))).toBe(true);
    expect(origin.hitsOf("/a.bin")).toBe(1);
    const ranged = await edgeRequest(edge, `/${host}/b.bin`, { headers: { range: "bytes=0-9" } });
    expect(ranged.status).toBe(206);
    expect(ranged.text).toBe("bbbbbbbbbb");
    expect(origin.hitsOf("/b.bin")).toBe(1);
  });

  it("applies purges to the disk tier too", async () => {
    await get("/c.bin"); // back in memory, pushing others to disk
    await waitForDiskFiles(t.store.dataDir, 2);
    const purge = await t.request("POST", `/v1/cdn/distributions/${distributionId}/purges`, {
      json: { paths: ["/*"] },
    });
    expect(purge.status).toBe(200);
    for (const name of ["a", "b", "c", "d", "e"]) {
      expect((await get(`/${name}.bin`)).headers["x-cache"], name).toBe("MISS");
    }
  });
});

describe("CDN edge disk tier, its byte limit", () => {
  const DISK_BYTES = 500_000;
  let t: TestApp;
  let origin: Origin;
  let edge: string;
  let host: string;
  const get = (path: string) => edgeRequest(edge, `/${host}${path}`, {});

  beforeAll(async () => {
    // Memory holds one large object at a time; the disk tier could hold none of them.
    t = await startTestApp({
      ...EDGE_ENV,
      CUMULO_EDGE_CACHE_BYTES: "1000000",
      CUMULO_EDGE_DISK_CACHE_BYTES: String(DISK_BYTES),
    });
    edge = edgeUrlOf(t);
    origin = await startOrigin();
    host = uniqueHost("disk-limit");
    await createDistribution(t, { hostname: host, origin_url: origin.url });
    const sizes: Record<string, number> = {
      "/large-1.bin": 700_000,
      "/large-2.bin": 700_000,
      "/large-3.bin": 700_000,
      "/medium.bin": 300_000,
    };
    for (const [path, bytes] of Object.entries(sizes)) {
      origin.route(path, (_req, res) => {
        res.writeHead(200, { "content-type": "application/octet-stream", "cache-control": "max-age=300" });
        res.end(Buffer.alloc(bytes, "x"));
      });
    }
  });
  afterAll(async () => {
    await t.close();
    await origin.close();
  });

  it("writes no file for an object larger than the whole tier", async () => {
    // Each request evicts the object before it: two large ones, then the medium one, which fits.
    for (const path of ["/large-1.bin", "/large-2.bin", "/medium.bin", "/large-3.bin"])
      expect((await get(path)).headers["x-cache"], path).toBe("MISS");
    const files = await waitForDiskFiles(t.store.dataDir, 1);
    expect(files).toHaveLength(1);
    expect(statSync(files[0] ?? "").size).toBeLessThanOrEqual(DISK_BYTES);
    expect((await get("/medium.bin")).headers["x-cache"]).toBe("HIT");
  });
});

describe("CDN edge disk tier on a full disk", () => {
  const cached = (bytes: number): CachedObject => {
    const headers = { "cache-control": "max-age=300" };
    const policy = new CachePolicy(
      { url: "/", method: "GET", headers: {} },
      { status: 200, headers },
      { shared: true },
    );
    const now = Date.now();
    return {
      status: 200,
      headers,
      body: Buffer.alloc(bytes, "x"),
      policy,
      freshUntil: now + 300_000,
      ageAtReceipt: 0,
      receivedAt: now,
      varies: false,
    };
  };

  it("removes the file of a write that fails", async (context) => {
    const root = mkdtempSync(join(tmpdir(), "cumulo-edge-disk-"));
    // A file system of 64 KiB: an object of 200 KB fills it and its write fails (ENOSPC) half done.
    if (!mountTmpfs(root, "64k")) {
      rmSync(root, { recursive: true, force: true });
      context.skip(NO_TMPFS);
    }
    const tier = new DiskTier(
      root,
      1_000_000,
      () => 0,
      (serialized) => CachePolicy.fromObject(serialized),
    );
    const directory = join(root, String(process.pid));
    try {
      await expect(tier.put("distribution\n/large", "distribution", cached(200_000), 0)).rejects.toThrow(
        /ENOSPC/,
      );
      expect(readdirSync(directory)).toEqual([]);
      // The space is free again: an object that fits is kept.
      await tier.put("distribution\n/small", "distribution", cached(10_000), 0);
      expect(readdirSync(directory)).toHaveLength(1);
    } finally {
      tier.close();
      unmountTmpfs(root);
      rmSync(root, { recursive: true, force: true });
    }
  });
});
