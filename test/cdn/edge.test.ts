import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";
import {
  createDistribution,
  EDGE_ENV,
  edgeRequest,
  edgeUrlOf,
  type Origin,
  startOrigin,
  TestClock,
  uniqueHost,
} from "./support.ts";

const MAX_OBJECT = 64 * 1024;

describe("CDN edge", () => {
  let t: TestApp;
  let origin: Origin;
  let edge: string;
  let host: string;
  let distributionId: string;
  const clock = new TestClock();
  const get = (path: string, headers: Record<string, string> = {}, method = "GET") =>
    edgeRequest(edge, `/${host}${path}`, { headers, method });

  beforeAll(async () => {
    t = await startTestApp(
      {
        ...EDGE_ENV,
        CUMULO_EDGE_ORIGIN_TIMEOUT_MS: "400",
        CUMULO_EDGE_MAX_OBJECT_BYTES: String(MAX_OBJECT),
      },
      { clock },
    );
    edge = edgeUrlOf(t);
    origin = await startOrigin();
    host = uniqueHost("edge");
    distributionId = (await createDistribution(t, { hostname: host, origin_url: `${origin.url}/root` })).id;
  });
  afterAll(async () => {
    await t.close();
    await origin.close();
  });

  it("answers every edge response with an X-Request-Id, echoing a safe given one", async () => {
    origin.route("/root/id.txt", (_req, res) =>
      res.writeHead(200, { "cache-control": "max-age=60" }).end("id"),
    );
    const served = await get("/id.txt");
    expect(served.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    const echoed = await get("/id.txt", { "x-request-id": "trace/abc+1=" });
    expect(echoed.headers["x-request-id"]).toBe("trace/abc+1=");
    // hits answered in one header list (plain) and through the range and conditional paths
    expect(echoed.headers["x-cache"]).toBe("HIT");
    const ranged = await get("/id.txt", { range: "bytes=0-0", "x-request-id": "ranged" });
    expect([ranged.status, ranged.headers["x-cache"], ranged.headers["x-request-id"]]).toEqual([
      206,
      "HIT",
      "ranged",
    ]);
    const unknown = await edgeRequest(edge, "/no-such-host.example.test/x", {
      headers: { "x-request-id": "bad id" },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("keeps one cached variant per value of the headers the origin varies by", async () => {
    origin.route("/root/greeting.txt", (req, res) => {
      const language = String(req.headers["accept-language"] ?? "en");
      res
        .writeHead(200, { "cache-control": "max-age=60", vary: "Accept-Language" })
        .end(language.startsWith("fr") ? "bonjour" : "hello");
    });
    const ask = (language: string) => get("/greeting.txt", { "accept-language": language });
    for (const [language, text] of [
      ["en", "hello"],
      ["fr", "bonjour"],
    ]) {
      const first = await ask(language as string);
      expect([first.headers["x-cache"], first.text]).toEqual(["MISS", text]);
    }
    for (const [language, text] of [
      ["fr", "bonjour"],
      ["en", "hello"],
    ]) {
      const again = await ask(language as string);
      expect([again.headers["x-cache"], again.text]).toEqual(["HIT", text]);
    }
    expect(origin.hitsOf("/root/greeting.txt")).toBe(2);

    // A purge of the path takes every variant.
    const purged = await t.request("POST", `/v1/cdn/distributions/${distributionId}/purges`, {
      json: { paths: ["/greeting.txt"] },
    });
    expect(purged.status).toBe(200);
    expect((await ask("fr")).headers["x-cache"]).toBe("MISS");
    expect((await ask("en")).headers["x-cache"]).toBe("MISS");

    // Vary: * answers are never stored.
    origin.route("/root/any.txt", (_req, res) =>
      res.writeHead(200, { "cache-control": "max-age=60", vary: "*" }).end("any"),
    );
    expect((await get("/any.txt")).headers["x-cache"]).toBe("MISS");
    expect((await get("/any.txt")).headers["x-cache"]).toBe("MISS");
  });

  it("serves a stale copy while the origin fails, when the origin allowed it with stale-if-error", async () => {
    let mode: "ok" | "500" | "reset" = "ok";
    const answer = (allowStale: boolean) => (req: IncomingMessage, res: ServerResponse) => {
      if (mode === "reset") return req.socket.destroy();
      if (mode === "500") return res.writeHead(500).end("broken");
      res
        .writeHead(200, { "cache-control": `max-age=1${allowStale ? ", stale-if-error=60" : ""}` })
        .end("good");
    };
    origin.route("/root/sie.txt", answer(true));
    origin.route("/root/strict.txt", answer(false));
    for (const path of ["/sie.txt", "/strict.txt"]) expect((await get(path)).text).toBe("good");
    clock.advance(1100); // both copies are stale now

    for (const failure of ["500", "reset"] as const) {
      mode = failure;
      const stale = await get("/sie.txt");
      expect([stale.status, stale.text, stale.headers["x-cache"]], failure).toEqual([200, "good", "HIT"]);
      const strict = await get("/strict.txt");
      expect(strict.status, failure).toBe(failure === "500" ? 500 : 502);
    }
    mode = "ok";
    expect((await get("/sie.txt")).headers["x-cache"]).toBe("MISS");
  });

  it("serves path-style and host-style, MISS then HIT with Age, one origin request", async () => {
    origin.route("/root/hello.txt", (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain", "cache-control": "max-age=60" }).end("hello");
    });
    const first = await get("/hello.txt?v=1");
    expect(first.status).toBe(200);
    expect(first.text).toBe("hello");
    expect(first.headers["x-cache"]).toBe("MISS");
    expect(first.headers.age).toBe("0");
    const second = await edgeRequest(edge, "/hello.txt?v=1", { host: `${host.toUpperCase()}:80` });
    expect(second.status).toBe(200);
    expect(second.text).toBe("hello");
    expect(second.headers["x-cache"]).toBe("HIT");
    expect(Number(second.headers.age)).toBeGreaterThanOrEqual(0);
    expect(origin.hitsOf("/root/hello.txt?v=1")).toBe(1);
    // the query is part of the key
    expect((await get("/hello.txt?v=2")).headers["x-cache"]).toBe("MISS");
    const head = await get("/hello.txt?v=1", {}, "HEAD");
    expect(head.status).toBe(200);
    expect(head.headers["content-length"]).toBe("5");
    expect(head.body.length).toBe(0);
    // Range is for GET only: a HEAD describes the whole object (RFC 9110, 14.2).
    const rangedHead = await get("/hello.txt?v=1", { range: "bytes=0-1" }, "HEAD");
    expect(rangedHead.status).toBe(200);
    expect(rangedHead.headers["content-length"]).toBe("5");
    expect((await get("/hello.txt?v=1", { range: "bytes=50-" }, "HEAD")).status).toBe(200);
    expect(origin.hitsOf("/root/hello.txt?v=1")).toBe(1);
  });

  it("turns an origin's redirects within itself into edge paths, path-style and host-style", async () => {
    const redirect =
      (status: number, location: string, cacheControl: string) => (_req: unknown, res: ServerResponse) =>
        res.writeHead(status, { location, "cache-control": cacheControl }).end();
    // The origin redirects in its own URL space: its base path (/root) included, its own host.
    origin.route("/root/dir", redirect(301, "/root/dir/", "max-age=60"));
    origin.route("/root/self", redirect(302, `${origin.url}/root/target?x=1#top`, "no-store"));
    origin.route("/root/relative", redirect(302, "sub/page", "no-store"));
    origin.route("/root/away", redirect(302, "https://example.org/x", "no-store"));
    origin.route("/root/outside", redirect(302, "/elsewhere", "no-store"));
    const locations = async (path: string) => [
      (await get(path)).headers.location,
      (await edgeRequest(edge, path, { host })).headers.location,
    ];
    // Kept (301, max-age) and relayed answers alike; the kept one serves both forms from one copy.
    expect(await locations("/dir")).toEqual([`/${host}/dir/`, "/dir/"]);
    expect((await get("/dir")).headers["x-cache"]).toBe("HIT");
    expect(origin.hitsOf("/root/dir")).toBe(1);
    expect(await locations("/self")).toEqual([`/${host}/target?x=1#top`, "/target?x=1#top"]);
    // What already leads where the origin meant is left alone.
    expect(await locations("/relative")).toEqual(["sub/page", "sub/page"]);
    expect(await locations("/away")).toEqual(["https://example.org/x", "https://example.org/x"]);
    expect(await locations("/outside")).toEqual(["/elsewhere", "/elsewhere"]);
  });

  it("sends a kept 204 without Content-Length", async () => {
    origin.route("/root/empty", (_req, res) => {
      res.writeHead(204, { "cache-control": "max-age=600" }).end();
    });
    for (const cacheStatus of ["MISS", "HIT"]) {
      const answer = await get("/empty");
      expect(answer.status).toBe(204);
      expect(answer.headers["x-cache"]).toBe(cacheStatus);
      expect(answer.headers["content-length"]).toBeUndefined();
    }
  });

  it("answers 404 for unknown hosts and disabled distributions, 405 for other methods", async () => {
    expect((await edgeRequest(edge, "/no-such-host.example/x")).status).toBe(404);
    expect((await edgeRequest(edge, "/x", { host: "nothing.example" })).status).toBe(404);
    expect((await get("/hello.txt", {}, "POST")).status).toBe(405);
    origin.route("/secret", (_req, res) => res.writeHead(200).end("outside the origin's base path"));
    expect((await get("/../secret")).status).toBe(404);
    expect((await get("/%2e%2e/secret")).status).toBe(404);
    expect(origin.hitsOf("/secret")).toBe(0);
    const disabledHost = uniqueHost("off");
    const disabled = await createDistribution(t, { hostname: disabledHost, origin_url: origin.url });
    origin.route("/on.txt", (_req, res) => res.writeHead(200, { "cache-control": "max-age=60" }).end("on"));
    expect((await edgeRequest(edge, `/${disabledHost}/on.txt`)).status).toBe(200);
    await t.request("PATCH", `/v1/cdn/distributions/${disabled.id}`, { json: { status: "disabled" } });
    expect((await edgeRequest(edge, `/${disabledHost}/on.txt`)).status).toBe(404);
    await t.request("PATCH", `/v1/cdn/distributions/${disabled.id}`, { json: { status: "active" } });
    expect((await edgeRequest(edge, `/${disabledHost}/on.txt`)).status).toBe(200);
    await t.request("DELETE", `/v1/cdn/distributions/${disabled.id}`);
    expect((await edgeRequest(edge, `/${disabledHost}/on.txt`)).status).toBe(404);
  });

  it("answers 404 for every path of a library distribution that names nothing playable", async () => {
    const library = await createLibrary(t, { name: "Edge library" });
    const hostname = `${library.id}.media.cumulo.local`;
    const notReady = await createVideo(t, library.id);
    // The name resolves to the library (another method is 405, not the unknown-host 404)...
    const post = await edgeRequest(edge, `/${hostname}/${notReady.id}/playlist.m3u8`, { method: "POST" });
    expect(post.status).toBe(405);
    // ...and the media origin finds nothing to play on each of these paths.
    for (const path of [
      `/${notReady.id}/playlist.m3u8`, // a video of the library that is not processed
      `/${randomUUID()}/playlist.m3u8`, // no such video
      `/${notReady.id}/no-such-file.txt`, // not an asset name
      "/video/playlist.m3u8", // not a video id
    ]) {
      const answer = await edgeRequest(edge, `/${hostname}${path}`);
      expect([answer.status, answer.text], path).toEqual([
        404,
        '{"success":false,"message":"Resource not found"}',
      ]);
    }
  });

  it("uses default_ttl_s when the origin says nothing, and max-age when it does", async () => {
    const shortHost = uniqueHost("ttl");
    await createDistribution(t, { hostname: shortHost, origin_url: origin.url, default_ttl_s: 1 });
    origin.route("/plain.txt", (_req, res) => res.writeHead(200).end("plain"));
    origin.route("/maxage.txt", (_req, res) =>
      res.writeHead(200, { "cache-control": "public, max-age=1" }).end("short"),
    );
    const path = (p: string) => `/${shortHost}${p}`;
    expect((await edgeRequest(edge, path("/plain.txt"))).headers["x-cache"]).toBe("MISS");
    expect((await edgeRequest(edge, path("/plain.txt"))).headers["x-cache"]).toBe("HIT");
    expect((await edgeRequest(edge, path("/maxage.txt"))).headers["x-cache"]).toBe("MISS");
    expect((await edgeRequest(edge, path("/maxage.txt"))).headers["x-cache"]).toBe("HIT");
    clock.advance(1100);
    expect((await edgeRequest(edge, path("/plain.txt"))).headers["x-cache"]).toBe("MISS");
    expect((await edgeRequest(edge, path("/maxage.txt"))).headers["x-cache"]).toBe("MISS");
    expect(origin.hitsOf("/plain.txt")).toBe(2);
    expect(origin.hitsOf("/maxage.txt")).toBe(2);
  });

  it("gives an answer with only Last-Modified no heuristic freshness: default_ttl_s decides", async () => {
    // RFC 9111's heuristic (10% of the time since Last-Modified) would keep these for weeks.
    const dated = { "last-modified": "Wed, 01 Jan 2025 00:00:00 GMT" };
    origin.route("/dated.txt", (_req, res) => res.writeHead(200, dated).end("dated"));
    origin.route("/dated-missing.txt", (_req, res) => res.writeHead(404, dated).end("missing"));
    const noTtlHost = uniqueHost("ttl0");
    await createDistribution(t, { hostname: noTtlHost, origin_url: origin.url, default_ttl_s: 0 });
    const withTtlHost = uniqueHost("ttl60");
    await createDistribution(t, { hostname: withTtlHost, origin_url: origin.url, default_ttl_s: 60 });
    const cacheOf = async (hostname: string, path: string) =>
      (await edgeRequest(edge, `/${hostname}${path}`)).headers["x-cache"];

    // default_ttl_s 0: only what the origin marks fresh is kept.
    expect([await cacheOf(noTtlHost, "/dated.txt"), await cacheOf(noTtlHost, "/dated.txt")]).toEqual([
      "MISS",
      "MISS",
    ]);
    // A 404 is kept only with explicit freshness, whatever default_ttl_s says.
    expect([
      await cacheOf(withTtlHost, "/dated-missing.txt"),
      await cacheOf(withTtlHost, "/dated-missing.txt"),
    ]).toEqual(["MISS", "MISS"]);
    expect(origin.hitsOf("/dated.txt")).toBe(2);
    expect(origin.hitsOf("/dated-missing.txt")).toBe(2);

    // default_ttl_s 60: a 200 is kept for 60 seconds, not for the heuristic's weeks.
    expect([await cacheOf(withTtlHost, "/dated.txt"), await cacheOf(withTtlHost, "/dated.txt")]).toEqual([
      "MISS",
      "HIT",
    ]);
    clock.advance(61_000);
    expect(await cacheOf(withTtlHost, "/dated.txt")).toBe("MISS");
  });

  it("revalidates a stale object with the origin instead of downloading it again", async () => {
    const conditional: (string | undefined)[] = [];
    origin.route("/root/tagged.txt", (req, res) => {
      conditional.push(req.headers["if-none-match"]);
      if (req.headers["if-none-match"] === '"t1"') {
        res.writeHead(304, { etag: '"t1"', "cache-control": "max-age=1" }).end();
        return;
      }
      res.writeHead(200, { etag: '"t1"', "cache-control": "max-age=1" }).end("tagged body");
    });
    expect((await get("/tagged.txt")).headers["x-cache"]).toBe("MISS");
    expect((await get("/tagged.txt")).headers["x-cache"]).toBe("HIT");
    clock.advance(1100);
    const revalidated = await get("/tagged.txt");
    expect(revalidated.status).toBe(200);
    expect(revalidated.text).toBe("tagged body");
    expect(revalidated.headers["x-cache"]).toBe("MISS");
    expect(conditional).toEqual([undefined, '"t1"']);
    const again = await get("/tagged.txt");
    expect(again.headers["x-cache"]).toBe("HIT");
    expect(again.text).toBe("tagged body");
  });

  it("never caches no-store or private answers, and honours s-maxage", async () => {
    origin.route("/root/nostore", (_req, res) =>
      res.writeHead(200, { "cache-control": "no-store" }).end("n"),
    );
    origin.route("/root/private", (_req, res) =>
      res.writeHead(200, { "cache-control": "private, max-age=600" }).end("p"),
    );
    origin.route("/root/shared", (_req, res) =>
      res.writeHead(200, { "cache-control": "max-age=0, s-maxage=600" }).end("s"),
    );
    for (let i = 0; i < 3; i++) {
      const noStore = await get("/nostore");
      expect(noStore.text).toBe("n");
      expect(noStore.headers["x-cache"]).toBe("MISS");
      expect((await get("/private")).headers["x-cache"]).toBe("MISS");
    }
    expect(origin.hitsOf("/root/nostore")).toBe(3);
    expect(origin.hitsOf("/root/private")).toBe(3);
    await get("/shared");
    expect((await get("/shared")).headers["x-cache"]).toBe("HIT");
    expect(origin.hitsOf("/root/shared")).toBe(1);
  });

  it("answers HEAD, conditional and unsatisfiable range requests for answers it does not keep", async () => {
    origin.route("/root/private.txt", (_req, res) =>
      res
        .writeHead(200, {
          "cache-control": "private",
          etag: '"p1"',
          "last-modified": "Wed, 01 Jan 2025 00:00:00 GMT",
          "content-length": "7",
        })
        .end("private"),
    );
    origin.route("/root/broken.txt", (_req, res) => res.writeHead(500).end("origin trouble"));
    // Each of these used to leave the origin's unread body to fail with no one listening: the
    // process died after answering.
    expect((await get("/missing.txt", {}, "HEAD")).status).toBe(404);
    expect((await get("/broken.txt", {}, "HEAD")).status).toBe(500);
    const head = await get("/private.txt", {}, "HEAD");
    expect([head.status, head.headers["content-length"], head.body.length]).toEqual([200, "7", 0]);
    expect((await get("/private.txt", { "if-none-match": '"p1"' })).status).toBe(304);
    expect((await get("/private.txt", { "if-modified-since": "Wed, 01 Jan 2025 00:00:00 GMT" })).status).toBe(
      304,
    );
    expect((await get("/private.txt", { range: "bytes=999999-" })).status).toBe(416);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const after = await get("/private.txt");
    expect([after.status, after.text]).toEqual([200, "private"]);
    expect((await t.request("GET", "/healthz")).status).toBe(200);
  });

  it("reads repeated header lines of an origin as one value each, and Vary names as header names only", async () => {
    const lines = (res: ServerResponse, name: string, values: string[]) => res.setHeader(name, values);
    origin.route("/root/two-cache-controls.txt", (_req, res) => {
      lines(res, "cache-control", ["max-age=600", "public"]);
      res.end("cc");
    });
    origin.route("/root/two-varies.txt", (_req, res) => {
      res.setHeader("cache-control", "max-age=600");
      lines(res, "vary", ["Accept-Encoding", "Accept-Language"]);
      res.end("vary");
    });
    origin.route("/root/two-etags.txt", (req, res) => {
      res.setHeader("cache-control", "max-age=1");
      lines(res, "etag", ['"a"', '"b"']);
      if (req.headers["if-none-match"]) res.writeHead(304).end();
      else res.end("etag");
    });
    origin.route("/root/vary-constructor.txt", (_req, res) => {
      res.writeHead(200, { "cache-control": "max-age=600", vary: "constructor, __proto__" }).end("proto");
    });
    for (const [path, text] of [
      ["/two-cache-controls.txt", "cc"],
      ["/two-varies.txt", "vary"],
      ["/two-etags.txt", "etag"],
      ["/vary-constructor.txt", "proto"],
    ]) {
      const first = await get(path);
      expect([first.status, first.text, first.headers["x-cache"]], path).toEqual([200, text, "MISS"]);
      const second = await get(path);
      expect([second.status, second.text, second.headers["x-cache"]], path).toEqual([200, text, "HIT"]);
    }
    // An absolute-form target names the distribution, whatever Host says (RFC 9112, 3.2.2).
    const absolute = await edgeRequest(edge, `http://${host}/two-etags.txt`, { host: "127.0.0.1" });
    expect([absolute.status, absolute.text]).toEqual([200, "etag"]);
    const elsewhere = await edgeRequest(edge, "http://nothing.example/two-etags.txt", { host });
    expect(elsewhere.status).toBe(404);
    // An absolute-form request target no URL can hold names nothing (it made the edge answer 500).
    for (const target of ["http://[::1/x", "http://a:b:c/x", "HTTP://x:99999/a"]) {
      const odd = await edgeRequest(edge, target);
      expect([odd.status, typeof odd.headers["x-request-id"]], target).toEqual([404, "string"]);
    }
    // The stored copy with two validators is revalidated once stale.
    clock.advance(1100);
    const revalidated = await get("/two-etags.txt");
    expect([revalidated.status, revalidated.text]).toEqual([200, "etag"]);
  });

  it("never stores an answer that sets a cookie: each viewer gets its own from the origin", async () => {
    let session = 0;
    origin.route("/root/login.txt", (_req, res) =>
      res
        .writeHead(200, { "cache-control": "public, max-age=300", "set-cookie": `session=s${++session}` })
        .end("welcome"),
    );
    for (const expected of ["session=s1", "session=s2"]) {
      const viewer = await get("/login.txt");
      expect([viewer.status, viewer.text, viewer.headers["x-cache"]]).toEqual([200, "welcome", "MISS"]);
      expect(viewer.headers["set-cookie"]).toEqual([expected]);
    }
    expect(origin.hitsOf("/root/login.txt")).toBe(2);

    // The platform's own cookies never pass: the edge answers on the console's host (cookies ignore
    // ports), and a tenant's origin swapped a viewer's console session for its own.
    origin.route("/root/toss.txt", (_req, res) =>
      res
        .writeHead(200, {
          "cache-control": "no-store",
          "set-cookie": [
            "cumulo_session=attacker; Path=/v1; HttpOnly",
            "__Host-cumulo_session=attacker; Path=/; Secure; HttpOnly",
            // Nameless: a browser that keeps it sends `cumulo_session=attacker`.
            "=cumulo_session=attacker; Path=/",
            " = __Host-cumulo_session=attacker; Path=/; Secure",
            "CUMULO_other=1",
            "theme=dark",
          ],
        })
        .end("toss"),
    );
    expect((await get("/toss.txt")).headers["set-cookie"]).toEqual(["theme=dark"]);

    // A cookie set by a revalidation 304 goes to that viewer only; the stored copy is not kept.
    origin.route("/root/revalidated-login.txt", (req, res) => {
      if (req.headers["if-none-match"] === '"c1"') {
        res.writeHead(304, { etag: '"c1"', "cache-control": "max-age=1", "set-cookie": "session=r1" }).end();
        return;
      }
      res.writeHead(200, { etag: '"c1"', "cache-control": "max-age=1" }).end("page");
    });
    expect((await get("/revalidated-login.txt")).headers["set-cookie"]).toBeUndefined();
    clock.advance(1100);
    const revalidated = await get("/revalidated-login.txt");
    expect([revalidated.text, revalidated.headers["set-cookie"]]).toEqual(["page", ["session=r1"]]);
    const next = await get("/revalidated-login.txt");
    expect([next.status, next.text, next.headers["set-cookie"]]).toEqual([200, "page", undefined]);
  });

  it("serves byte ranges from the cache (206, 416) and conditional requests (304)", async () => {
    const body = Buffer.from("0123456789abcdefghij");
    origin.route("/root/range.bin", (_req, res) =>
      res
        .writeHead(200, {
          "cache-control": "max-age=600",
          etag: '"v1"',
          "last-modified": "Wed, 21 Oct 2026 07:28:00 GMT",
        })
        .end(body),
    );
    const part = await get("/range.bin", { range: "bytes=2-5" });
    expect(part.status).toBe(206);
    expect(part.text).toBe("2345");
    expect(part.headers["content-range"]).toBe("bytes 2-5/20");
    const suffix = await get("/range.bin", { range: "bytes=-3" });
    expect(suffix.status).toBe(206);
    expect(suffix.text).toBe("hij");
    expect(suffix.headers["x-cache"]).toBe("HIT");
    const open = await get("/range.bin", { range: "bytes=18-" });
    expect(open.text).toBe("ij");
    const outside = await get("/range.bin", { range: "bytes=20-30" });
    expect(outside.status).toBe(416);
    expect(outside.headers["content-range"]).toBe("bytes */20");
    expect(outside.headers["x-cache"]).toBe("HIT");
    expect(outside.headers.age).toMatch(/^\d+$/);
    const staleIfRange = await get("/range.bin", { range: "bytes=0-1", "if-range": '"v0"' });
    expect(staleIfRange.status).toBe(200);
    expect(staleIfRange.body.length).toBe(20);

    // conditional on a miss: the object is fetched, stored, and the viewer gets 304
    origin.route("/root/fresh-tag.bin", (_req, res) =>
      res.writeHead(200, { "cache-control": "max-age=600", etag: 'W/"w1"' }).end("body"),
    );
    const missConditional = await get("/fresh-tag.bin", { "if-none-match": '"x", W/"w1"' });
    expect(missConditional.status).toBe(304);
    expect(missConditional.headers["x-cache"]).toBe("MISS");
    expect((await get("/fresh-tag.bin")).text).toBe("body");
    expect(origin.hitsOf("/root/fresh-tag.bin")).toBe(1);

    const byTag = await get("/range.bin", { "if-none-match": '"v1"' });
    expect(byTag.status).toBe(304);
    expect(byTag.body.length).toBe(0);
    expect(byTag.headers.etag).toBe('"v1"');
    const otherTag = await get("/range.bin", { "if-none-match": '"v0"' });
    expect(otherTag.status).toBe(200);
    const byDate = await get("/range.bin", { "if-modified-since": "Thu, 22 Oct 2026 07:28:00 GMT" });
    expect(byDate.status).toBe(304);
    const older = await get("/range.bin", { "if-modified-since": "Tue, 20 Oct 2026 07:28:00 GMT" });
    expect(older.status).toBe(200);
    expect(origin.hitsOf("/root/range.bin")).toBe(1);
  });

  it("coalesces concurrent misses of one object into one origin request", async () => {
    origin.route("/root/slow.bin", async (_req, res) => {
      await new Promise((resolve) => setTimeout(resolve, 250));
      res.writeHead(200, { "cache-control": "max-age=600" }).end(Buffer.alloc(4096, 7));
    });
    const responses = await Promise.all(Array.from({ length: 20 }, () => get("/slow.bin")));
    for (const response of responses) {
      expect(response.status).toBe(200);
      expect(response.body.length).toBe(4096);
    }
    expect(origin.hitsOf("/root/slow.bin")).toBe(1);
  });

  // QA of 6 December (session 47): a 503 marked `max-age=30` reached the origin once per viewer.
  it("keeps an error answer the origin made explicitly fresh, and shares it with viewers waiting on it", async () => {
    const statuses = [400, 403, 429, 451, 500, 502, 503, 504];
    for (const status of statuses) {
      origin.route(`/root/fresh-${status}`, async (_req, res) => {
        await new Promise((resolve) => setTimeout(resolve, 100));
        res
          .writeHead(status, { "cache-control": "max-age=30", "retry-after": "30" })
          .end(`failing ${status}`);
      });
      origin.route(`/root/plain-${status}`, (_req, res) => res.writeHead(status).end(`failing ${status}`));
    }
    for (const status of statuses) {
      const viewers = await Promise.all(Array.from({ length: 5 }, () => get(`/fresh-${status}`)));
      expect(viewers.map((viewer) => [viewer.status, viewer.text])).toEqual(
        Array.from({ length: 5 }, () => [status, `failing ${status}`]),
      );
      const later = await get(`/fresh-${status}`);
      expect([later.status, later.headers["x-cache"], later.headers["retry-after"]]).toEqual([
        status,
        "HIT",
        "30",
      ]);
      expect(origin.hitsOf(`/root/fresh-${status}`), `status ${status}`).toBe(1);
      // Without freshness of its own an error is never kept, whatever the distribution's default TTL.
      await get(`/plain-${status}`);
      expect((await get(`/plain-${status}`)).headers["x-cache"]).toBe("MISS");
      expect(origin.hitsOf(`/root/plain-${status}`)).toBe(2);
    }
    clock.advance(31_000);
    expect((await get("/fresh-503")).headers["x-cache"]).toBe("MISS");
    expect(origin.hitsOf("/root/fresh-503")).toBe(2);
  });

  // QA of 5 December (session 42): a viewer arriving after a purge had answered joined a fetch started
  // before it, and got the content the purge was for.
  it("does not give a viewer who comes after a purge the answer of a fetch started before it", async () => {
    let version = 1;
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    origin.route("/root/slow-purged.txt", async (_req, res) => {
      const sent = `v${version}`;
      // The fetch from before the purge stays under way until the test is done with it.
      if (sent === "v1") await released;
      res.writeHead(200, { "cache-control": "max-age=600" }).end(sent);
    });
    const distribution = (await t.request("GET", "/v1/cdn/distributions?limit=100")).body.data.find(
      (d: { hostname: string }) => d.hostname === host,
    );
    const before = get("/slow-purged.txt");
    await waitUntil(() => origin.hitsOf("/root/slow-purged.txt") === 1, 5000, "the first fetch");
    version = 2;
    const purged = await t.request("POST", `/v1/cdn/distributions/${distribution.id}/purges`, {
      json: { paths: ["/slow-purged.txt"] },
    });
    expect(purged.status).toBe(200);
    // Joined to the fetch from before, it would wait for it (or its origin timeout) and get its answer.
    const after = await Promise.race([
      get("/slow-purged.txt"),
      new Promise<{ text: string }>((resolve) =>
        setTimeout(() => resolve({ text: "still waiting on the fetch from before the purge" }), 3000),
      ),
    ]);
    release();
    expect(after.text).toBe("v2");
    await before;
  });

  it("streams objects over the cacheable limit through without keeping them", async () => {
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const half = Buffer.alloc(MAX_OBJECT * 2, 1);
    origin.route("/root/big.bin", async (_req, res) => {
      res.writeHead(200, { "cache-control": "max-age=600", "content-length": String(half.length * 2) });
      res.write(half);
      await released; // the viewer must see bytes before the origin has sent everything
      res.end(half);
    });
    const received = await new Promise<{ status: number; bytes: number; firstBeforeEnd: boolean }>(
      (resolve, reject) => {
        const req = request(new URL(`/${host}/big.bin`, edge), { agent: false }, (res) => {
          let bytes = 0;
          let firstBeforeEnd = false;
          res.on("data", (chunk: Buffer) => {
            if (bytes === 0) {
              firstBeforeEnd = true;
              release();
            }
            bytes += chunk.length;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, bytes, firstBeforeEnd }));
          res.on("error", reject);
        });
        req.on("error", reject);
        req.end();
      },
    );
    expect(received).toEqual({ status: 200, bytes: half.length * 2, firstBeforeEnd: true });
    const ranged = await get("/big.bin", { range: "bytes=10-19" });
    expect(ranged.status).toBe(206);
    expect(ranged.body.length).toBe(10);
    expect(ranged.headers["x-cache"]).toBe("MISS");
    // The range was asked of the origin after its first answer; this one ignores Range and sends the
    // whole object again, which is cut.
    expect(origin.hitsOf("/root/big.bin")).toBe(3);

    // Without a length: found too large while it is being read, then streamed through.
    origin.route("/root/chunked.bin", (_req, res) => {
      res.writeHead(200, { "cache-control": "max-age=600" });
      res.write(half);
      res.end(half);
    });
    const chunked = await get("/chunked.bin");
    expect([chunked.status, chunked.body.length]).toEqual([200, half.length * 2]);
    expect((await get("/chunked.bin")).headers["x-cache"]).toBe("MISS");
  });

  it("answers 502 when the origin is unreachable and 504 when it is too slow", async () => {
    const deadHost = uniqueHost("dead");
    await createDistribution(t, { hostname: deadHost, origin_url: "http://127.0.0.1:9" });
    const dead = await edgeRequest(edge, `/${deadHost}/x`);
    expect(dead.status).toBe(502);
    // Both went to the origin: misses, with the cache headers of any other answer.
    expect(dead.headers).toMatchObject({ "x-cache": "MISS", age: "0" });
    origin.route("/root/hang", () => undefined); // never answers
    const started = Date.now();
    const slow = await get("/hang");
    expect(slow.status).toBe(504);
    expect(slow.headers).toMatchObject({ "x-cache": "MISS", age: "0" });
    expect(Date.now() - started).toBeLessThan(3000);
    // the edge keeps serving
    expect((await get("/hello.txt?v=1")).status).toBe(200);
  });

  it("purges exact paths and prefixes before answering", async () => {
    let version = 1;
    for (const path of ["/img/a.png", "/img/b.png", "/css/site.css"]) {
      origin.route(`/root${path}`, (_req, res) =>
        res.writeHead(200, { "cache-control": "max-age=600" }).end(`${path}@${version}`),
      );
      await get(path);
      await get(`${path}?x=1`);
    }
    version = 2;
    const distribution = (await t.request("GET", "/v1/cdn/distributions?limit=100")).body.data.find(
      (d: { hostname: string }) => d.hostname === host,
    );
    const purge = (paths: string[]) =>
      t.request("POST", `/v1/cdn/distributions/${distribution.id}/purges`, { json: { paths } });

    expect((await purge(["/img/a.png"])).status).toBe(200);
    const a = await get("/img/a.png");
    expect(a.headers["x-cache"]).toBe("MISS");
    expect(a.text).toBe("/img/a.png@2");
    expect((await get("/img/a.png?x=1")).headers["x-cache"]).toBe("MISS");
    expect((await get("/img/b.png")).headers["x-cache"]).toBe("HIT");

    await purge(["/img/*"]);
    expect((await get("/img/b.png")).text).toBe("/img/b.png@2");
    expect((await get("/css/site.css")).headers["x-cache"]).toBe("HIT");

    await purge(["/*"]);
    expect((await get("/css/site.css")).text).toBe("/css/site.css@2");
  });

  it("purges a path written as text the way viewers' browsers send it (percent-encoded)", async () => {
    let version = 1;
    for (const path of ["/caf%C3%A9.png", "/new%20file.txt", "/%F0%9F%8E%AC/clip.mp4"]) {
      origin.route(`/root${path}`, (_req, res) =>
        res.writeHead(200, { "cache-control": "max-age=600" }).end(`${path}@${version}`),
      );
      await get(path);
      expect((await get(path)).headers["x-cache"]).toBe("HIT");
    }
    version = 2;
    const distribution = (await t.request("GET", "/v1/cdn/distributions?limit=100")).body.data.find(
      (d: { hostname: string }) => d.hostname === host,
    );
    const purged = await t.request("POST", `/v1/cdn/distributions/${distribution.id}/purges`, {
      json: { paths: ["/café.png", "/new file.txt", "/🎬/*"] },
    });
    expect(purged.status).toBe(200);
    expect((await get("/caf%C3%A9.png")).text).toBe("/caf%C3%A9.png@2");
    expect((await get("/new%20file.txt")).text).toBe("/new%20file.txt@2");
    expect((await get("/%F0%9F%8E%AC/clip.mp4")).text).toBe("/%F0%9F%8E%AC/clip.mp4@2");
    // The history keeps the paths as they were given.
    const history = await t.request("GET", `/v1/cdn/distributions/${distribution.id}/purges`);
    expect(history.body.data[0].paths).toEqual(["/café.png", "/new file.txt", "/🎬/*"]);
  });

  it("caches and purges every equivalent spelling of a path as one object (RFC 3986 normalization)", async () => {
    let version = 1;
    for (const path of ["/norm/a/b", "/norm/~u/p", "/norm/a%2Fb"]) {
      origin.route(`/root${path}`, (_req, res) =>
        res.writeHead(200, { "cache-control": "max-age=600" }).end(`${path}@${version}`),
      );
    }
    const answerOf = async (path: string) => {
      const answer = await get(path);
      return [path, answer.headers["x-cache"], answer.text];
    };
    expect(await answerOf("/norm/a/b")).toEqual(["/norm/a/b", "MISS", "/norm/a/b@1"]);
    for (const spelling of [
      "/norm/a/./b",
      "/norm/a/x/../b",
      "/norm/x/../a/b",
      "/norm/%61/%62",
      "/norm/%2e/a/b",
      // Sent by hand only (browsers keep fragments to themselves): no object of its own.
      "/norm/a/b#fragment",
    ]) {
      expect(await answerOf(spelling)).toEqual([spelling, "HIT", "/norm/a/b@1"]);
    }
    expect(await answerOf("/norm/%7Eu/p")).toEqual(["/norm/%7Eu/p", "MISS", "/norm/~u/p@1"]);
    for (const spelling of ["/norm/~u/p", "/norm/%7eu/p", "/norm/%7E%75/%70"]) {
      expect(await answerOf(spelling)).toEqual([spelling, "HIT", "/norm/~u/p@1"]);
    }
    // A reserved character stays encoded (`%2F` is no `/`), only its hex digits' case is normalized.
    expect(await answerOf("/norm/a%2Fb")).toEqual(["/norm/a%2Fb", "MISS", "/norm/a%2Fb@1"]);
    expect(await answerOf("/norm/a%2fb")).toEqual(["/norm/a%2fb", "HIT", "/norm/a%2Fb@1"]);
    // The origin was asked once per object, for the normal form.
    expect(
      ["/root/norm/a/b", "/root/norm/~u/p", "/root/norm/a%2Fb"].map((path) => origin.hitsOf(path)),
    ).toEqual([1, 1, 1]);

    // Purges match whatever spelling was asked for or purged: no spelling keeps a purged copy.
    version = 2;
    const purge = (paths: string[]) =>
      t.request("POST", `/v1/cdn/distributions/${distributionId}/purges`, { json: { paths } });
    expect((await purge(["/norm/a/b", "/norm/%7Eu/*"])).status).toBe(200);
    expect(await answerOf("/norm/a/./b")).toEqual(["/norm/a/./b", "MISS", "/norm/a/b@2"]);
    expect(await answerOf("/norm/~u/p")).toEqual(["/norm/~u/p", "MISS", "/norm/~u/p@2"]);
    expect(await answerOf("/norm/a/b#fragment")).toEqual(["/norm/a/b#fragment", "HIT", "/norm/a/b@2"]);
    version = 3;
    await purge(["/norm/x/../%61/*"]);
    expect(await answerOf("/norm/%61/b")).toEqual(["/norm/%61/b", "MISS", "/norm/a/b@3"]);
  });

  it("follows an origin change at once", async () => {
    const second = await startOrigin();
    try {
      second.route("/moved.txt", (_req, res) =>
        res.writeHead(200, { "cache-control": "max-age=600" }).end("new"),
      );
      const movingHost = uniqueHost("move");
      const moving = await createDistribution(t, { hostname: movingHost, origin_url: origin.url });
      origin.route("/moved.txt", (_req, res) =>
        res.writeHead(200, { "cache-control": "max-age=600" }).end("old"),
      );
      expect((await edgeRequest(edge, `/${movingHost}/moved.txt`)).text).toBe("old");
      await t.request("PATCH", `/v1/cdn/distributions/${moving.id}`, { json: { origin_url: second.url } });
      expect((await edgeRequest(edge, `/${movingHost}/moved.txt`)).text).toBe("new");

      // A viewer arriving after the change does not wait on a fetch from the old origin still under way.
      let release: () => void = () => undefined;
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      origin.route("/slow.txt", async (_req, res) => {
        await released;
        res.writeHead(200, { "cache-control": "max-age=600" }).end("old and slow");
      });
      second.route("/slow.txt", (_req, res) =>
        res.writeHead(200, { "cache-control": "max-age=600" }).end("quick"),
      );
      await t.request("PATCH", `/v1/cdn/distributions/${moving.id}`, { json: { origin_url: origin.url } });
      const early = edgeRequest(edge, `/${movingHost}/slow.txt`);
      await waitUntil(() => origin.hitsOf("/slow.txt") === 1, 5_000, "the old origin asked");
      await t.request("PATCH", `/v1/cdn/distributions/${moving.id}`, { json: { origin_url: second.url } });
      const late = await edgeRequest(edge, `/${movingHost}/slow.txt`);
      expect(late.text).toBe("quick");
      release();
      await early; // the old origin's answer, or 504 past this test's 400 ms origin timeout
    } finally {
      await second.close();
    }
  });
});
