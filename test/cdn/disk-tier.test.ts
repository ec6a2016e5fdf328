import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
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

const OBJECT_BYTES = 4000;

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

  /** Eviction to disk is written in the background; wait until the file is there. */
  const waitForDiskFiles = async (count: number) => {
    const root = join(t.store.dataDir, "edge-cache");
    const files = () =>
      existsSync(root) ? readdirSync(root).flatMap((dir) => readdirSync(join(root, dir))) : [];
    for (let i = 0; i < 100 && files().length < count; i++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(files().length).toBeGreaterThanOrEqual(count);
  };

  it("keeps objects evicted from memory on disk and serves them as hits without the origin", async () => {
    for (const name of ["a", "b", "c", "d", "e"])
      expect((await get(`/${name}.bin`)).headers["x-cache"]).toBe("MISS");
    await waitForDiskFiles(3);
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
    await waitForDiskFiles(2);
    const purge = await t.request("POST", `/v1/cdn/distributions/${distributionId}/purges`, {
      json: { paths: ["/*"] },
    });
    expect(purge.status).toBe(200);
    for (const name of ["a", "b", "c", "d", "e"]) {
      expect((await get(`/${name}.bin`)).headers["x-cache"], name).toBe("MISS");
    }
  });
});
