import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

/** A stand-in build of the console: what Vite writes (index.html and hashed assets). */
function fakeBuild(): string {
  const dir = mkdtempSync(join(tmpdir(), "cumulo-console-"));
  mkdirSync(join(dir, "assets"));
  writeFileSync(
    join(dir, "index.html"),
    '<!doctype html><script src="/console/assets/index-abc123.js"></script>',
  );
  writeFileSync(join(dir, "assets", "index-abc123.js"), `console.log(${JSON.stringify("x".repeat(4096))});`);
  return dir;
}

describe("the console's files at /console", () => {
  let app: TestApp;
  let dir: string;

  beforeAll(async () => {
    dir = fakeBuild();
    app = await startTestApp({ CUMULO_CONSOLE_DIR: dir });
  });
  afterAll(async () => {
    await app?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers /console and any page under it with index.html, revalidated each time", async () => {
    // index.html by its own name too: framed, the signed-in console could be clicked through.
    for (const path of [
      "/console",
      "/console/",
      "/console/libraries/abc/videos/def",
      "/console/index.html",
    ]) {
      const response = await app.request("GET", path, { anonymous: true });
      expect(response.status, path).toBe(200);
      expect(response.headers.get("content-type")).toMatch(/^text\/html/);
      expect(response.headers.get("cache-control")).toBe("no-cache");
      expect(response.headers.get("x-frame-options"), path).toBe("DENY");
      expect(response.headers.get("referrer-policy"), path).toBe("strict-origin-when-cross-origin");
      // Scripts only from the console's own files: injected markup cannot run.
      const policy = response.headers.get("content-security-policy") ?? "";
      expect(policy, path).toContain("script-src 'self';");
      expect(policy, path).toContain("frame-ancestors 'none'");
      expect(response.text).toContain("/console/assets/index-abc123.js");
    }
  });

  it("serves hashed assets as immutable and compressed when the browser accepts it", async () => {
    const response = await app.request("GET", "/console/assets/index-abc123.js", {
      anonymous: true,
      headers: { "accept-encoding": "gzip" },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(response.headers.get("content-encoding")).toBe("gzip");
    expect(response.text).toContain("xxxx");
    expect(response.headers.get("vary")).toBe("accept-encoding");
    // Uncompressed too, a shared cache must know the answer depends on Accept-Encoding.
    for (const path of ["/console/assets/index-abc123.js", "/console"]) {
      const plain = await app.request("GET", path, {
        anonymous: true,
        headers: { "accept-encoding": "identity" },
      });
      expect(plain.headers.get("content-encoding")).toBeNull();
      expect(plain.headers.get("vary"), path).toBe("accept-encoding");
    }
  });

  it("answers ranges and preconditions it cannot meet with 416 and 412, never 500", async () => {
    const asset = "/console/assets/index-abc123.js";
    for (const path of [asset, "/console", "/console/libraries/abc"]) {
      const get = (headers: Record<string, string>) => app.request("GET", path, { anonymous: true, headers });
      expect((await get({ range: "bytes=0-9" })).status, path).toBe(206);
      const past = await get({ range: "bytes=99999999-" });
      expect(past.status, path).toBe(416);
      expect(past.headers.get("content-range"), path).toMatch(/^bytes \*\/\d+$/);
      expect(past.body, path).toEqual({ success: false, message: "Range Not Satisfiable" });
      for (const range of ["bytes=abc", "bytes=5-2"])
        expect((await get({ range })).status, range).not.toBe(500);
      expect((await get({ "if-match": '"nope"' })).status, path).toBe(412);
      const since = "Mon, 01 Jan 2001 00:00:00 GMT";
      expect((await get({ "if-unmodified-since": since })).status, path).toBe(412);
    }
  });

  it("answers 404 for an asset that is not in the build (not index.html)", async () => {
    const response = await app.request("GET", "/console/assets/index-old999.js", { anonymous: true });
    expect(response.status).toBe(404);
    expect(response.text).not.toContain("<script");
  });

  it("keeps API answers as they were (no compression outside /console)", async () => {
    const response = await app.request("GET", "/v1/media/libraries", {
      headers: { "accept-encoding": "gzip" },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-encoding")).toBeNull();
  });

  it("never lets the API reference at /docs be framed, as the console is not (same origin)", async () => {
    for (const path of ["/docs", "/docs/", "/docs/js/scalar.js"]) {
      const response = await app.request("GET", path, { anonymous: true });
      expect(response.status, path).toBe(200);
      expect(response.headers.get("x-frame-options"), path).toBe("DENY");
      expect(response.headers.get("content-security-policy"), path).toBe("frame-ancestors 'none'");
    }
  });

  it("sends the reference's script and the OpenAPI document compressed, and a 304 to a browser that has them", async () => {
    for (const path of ["/docs/js/scalar.js", "/openapi.json"]) {
      const plain = await request(app.baseUrl + path);
      const original = Buffer.from(await plain.body.arrayBuffer());
      expect(plain.headers["content-encoding"], path).toBeUndefined();
      for (const [coding, decode] of [
        ["br", brotliDecompressSync],
        ["gzip", gunzipSync],
      ] as const) {
        const response = await request(app.baseUrl + path, {
          headers: { "accept-encoding": `${coding}, identity;q=0.5` },
        });
        const body = Buffer.from(await response.body.arrayBuffer());
        expect(response.headers["content-encoding"], path).toBe(coding);
        expect(response.headers.vary, path).toContain("accept-encoding");
        expect(body.length, path).toBeLessThan(original.length / 3);
        expect(decode(body).equals(original), path).toBe(true);
        const etag = String(response.headers.etag);
        const again = await request(app.baseUrl + path, {
          headers: { "accept-encoding": coding, "if-none-match": etag },
        });
        expect(again.statusCode, path).toBe(304);
        expect((await again.body.arrayBuffer()).byteLength, path).toBe(0);
        // The other coding's copy is another representation: not revalidated by this tag.
        const other = await request(app.baseUrl + path, {
          headers: { "accept-encoding": coding === "br" ? "gzip" : "br", "if-none-match": etag },
        });
        expect(other.statusCode, path).toBe(200);
        await other.body.dump();
      }
    }
  });

  it("is not in the OpenAPI document", async () => {
    const document = (await app.request("GET", "/openapi.json", { anonymous: true })).body;
    expect(Object.keys(document.paths).filter((path) => path.startsWith("/console"))).toEqual([]);
  });
});

describe("a console that was not built", () => {
  let app: TestApp;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "cumulo-console-empty-"));
    app = await startTestApp({ CUMULO_CONSOLE_DIR: dir });
  });
  afterAll(async () => {
    await app?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers 503 with a page saying how to build it, and the API still works", async () => {
    const response = await app.request("GET", "/console/keys", { anonymous: true });
    expect(response.status).toBe(503);
    expect(response.headers.get("content-type")).toMatch(/^text\/html/);
    expect(response.text).toContain("npm run console:build");
    expect((await app.request("GET", "/v1/media/libraries")).status).toBe(200);
  });
});
