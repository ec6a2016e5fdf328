import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Metrics } from "../../src/ops/metrics.ts";
import { latestMigration } from "../../src/store/migrations/index.ts";
import { API_VERSION } from "../../src/version.ts";
import { locateMediaTools, MediaTools } from "../../src/video/media-tools.ts";
import {
  createDistribution,
  EDGE_ENV,
  edgeRequest,
  startOrigin,
  TestClock,
  uniqueHost,
} from "../cdn/support.ts";
import { createLibrary as createMediaLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { generateClip } from "../support/media.ts";
import { parseSamples, scrapeMetrics, sampleValue as value } from "../support/metrics.ts";
import { startTestS3 } from "../support/s3.ts";
import { createMigratedTestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import {
  createEndpoint,
  createLibrary,
  organizationOf,
  startReceiver,
  webhooksPath,
} from "../webhooks/helpers.ts";

const TOKEN = "metrics-token-0123456789abcdef";
const PROVISION = "media.provision-library";
const RULES_FILE = join(import.meta.dirname, "../../deploy/prometheus/cumulo-alerts.yml");
// 1x1 PNG, a video's poster
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);

/** Edge answers counted so far, whatever their cache status. */
const edgeAnswers = (samples: Map<string, number>): number =>
  [...samples]
    .filter(([series]) => series.startsWith("cumulo_edge_requests_total"))
    .reduce((sum, [, count]) => sum + count, 0);

const scrape = (t: TestApp) => scrapeMetrics(t, TOKEN);

const promtool = spawnSync("promtool", ["--version"]).status === 0;

describe("metrics", () => {
  let t: TestApp;
  let edgeUrl: string;

  beforeAll(async () => {
    t = await startTestApp({
      ...EDGE_ENV,
      CUMULO_METRICS_TOKEN: TOKEN,
      CUMULO_RATE_LIMIT: "40/1m",
      CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
    });
    edgeUrl = t.cumulo.edgeUrl ?? "";
  });
  afterAll(() => t.close());

  it("serves /metrics on the API port only with the token", async () => {
    expect((await t.request("GET", "/metrics", { anonymous: true })).status).toBe(401);
    const wrong = await t.request("GET", "/metrics", {
      headers: { authorization: "Bearer wrong-token-0123456789" },
    });
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual({ error: "unauthorized", message: "A valid metrics token is required" });
    // An API key is not the metrics token.
    expect((await t.request("GET", "/metrics")).status).toBe(401);
    const right = await t.request("GET", "/metrics", { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(right.status).toBe(200);
    expect(right.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(right.text).toContain("process_cpu_user_seconds_total");
    // Which version each node runs, for a rolling upgrade.
    expect(right.text).toContain(
      `cumulo_build_info{version="${API_VERSION}",schema="${latestMigration()}"} 1`,
    );
    // Without a GeoIP database there is no build time to report.
    expect(right.text).not.toContain("cumulo_geoip_database_build_timestamp_seconds");
    const document = await t.request("GET", "/openapi.json");
    expect(Object.keys(document.body.paths)).not.toContain("/metrics");
  });

  it("exports every outcome of the bounded counters at 0 from the start, and counts no probe or scrape as an API request", async () => {
    const { samples, text } = await scrape(t);
    // A series born with its first event counted hides that event from rate() and increase() (QA of session 48).
    for (const outcome of ["succeeded", "failed", "timed_out"]) {
      expect(samples.has(`cumulo_ffmpeg_runs_total{tool="ffprobe",outcome="${outcome}"}`)).toBe(true);
    }
    for (const outcome of ["delivered", "refused", "unanswered"]) {
      expect(samples.has(`cumulo_webhook_attempts_total{outcome="${outcome}"}`)).toBe(true);
    }
    expect(samples.has(`cumulo_job_runs_total{kind="${PROVISION}",outcome="failed"}`)).toBe(true);
    for (const cache of ["hit", "miss", "media", "none"]) {
      expect(samples.has(`cumulo_edge_requests_total{cache="${cache}"}`)).toBe(true);
    }
    // Every route's 500, the code of an unexpected failure, from the start: the first one after a
    // start (a deploy) was invisible to increase().
    for (const [method, route] of [
      ["DELETE", "/v1/media/libraries/:libraryId"],
      ["POST", "/v1/cdn/distributions"],
      // tus's offset query: a HEAD route of its own, not the twin of a GET.
      ["HEAD", "/v1/media/tus/:uploadId"],
    ]) {
      expect(
        samples.get(`cumulo_http_requests_total{route="${route}",method="${method}",status="500"}`),
      ).toBe(0);
    }
    // Neither a HEAD twin of each GET, the console's built files (named anew by each build) nor the
    // operators' own routes.
    expect(text).not.toMatch(/cumulo_http_requests_total\{route="\/v1\/cdn\/distributions",method="HEAD"/);
    expect(text).not.toMatch(/route="\/console\/assets\/[^*]/);
    expect(text).not.toMatch(/route="\/(healthz|readyz|metrics)"/);
    expect(text).toMatch(/^cumulo_store_up 1$/m);
    for (const probe of ["/healthz", "/readyz"]) {
      expect((await t.request("GET", probe, { anonymous: true })).status).toBe(200);
    }
    const after = (await scrape(t)).text;
    expect(after).not.toMatch(/route="\/(healthz|readyz|metrics)"/);
  });

  it("counts API requests by route template, method and status, and rate-limit refusals", async () => {
    const other = await t.createOrganization("Metrics rate limit");
    const unknownLibrary = randomUUID();
    const before = (await scrape(t)).samples;
    for (let i = 0; i < 3; i++) expect((await t.request("GET", "/v1/cdn/distributions")).status).toBe(200);
    expect((await t.request("GET", `/v1/media/libraries/${unknownLibrary}`)).status).toBe(404);
    expect((await t.request("GET", "/no/such/path")).status).toBe(404);
    // The other organization's key spends its budget of 40 and is refused once.
    for (let i = 0; i < 40; i++) {
      expect((await t.request("GET", "/v1/cdn/distributions", { key: other.key })).status).toBe(200);
    }
    expect((await t.request("GET", "/v1/cdn/distributions", { key: other.key })).status).toBe(429);
    const { text, samples: after } = await scrape(t);

    const moved = (name: string, labels: Record<string, string> = {}) =>
      value(after, name, labels) - value(before, name, labels);
    const route = (path: string, status: string) => ({ route: path, method: "GET", status });
    expect(moved("cumulo_http_requests_total", route("/v1/cdn/distributions", "200"))).toBe(43);
    expect(moved("cumulo_http_requests_total", route("/v1/cdn/distributions", "429"))).toBe(1);
    expect(moved("cumulo_http_requests_total", route("/v1/media/libraries/:libraryId", "404"))).toBe(1);
    expect(moved("cumulo_http_requests_total", route("unmatched", "404"))).toBe(1);
    expect(moved("cumulo_rate_limit_refusals_total")).toBe(1);
    const durations = { route: "/v1/cdn/distributions", method: "GET", status_class: "2xx" };
    expect(moved("cumulo_http_request_duration_seconds_count", durations)).toBe(43);
    expect(moved("cumulo_http_request_duration_seconds_bucket", { le: "+Inf", ...durations })).toBe(43);
    // Store queries were timed; URLs never become labels.
    expect(moved("cumulo_store_query_duration_seconds_count")).toBeGreaterThan(0);
    expect(text).not.toContain(unknownLibrary);
    expect(text).not.toContain("/no/such/path");
  });

  it("counts edge hits, misses, bytes, origin time and coalesced misses", async () => {
    const origin = await startOrigin();
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    origin.route("/page.txt", (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain", "cache-control": "max-age=300" }).end("0123456789");
    });
    origin.route("/slow.txt", async (_req, res) => {
      await held;
      res.writeHead(200, { "content-type": "text/plain", "cache-control": "max-age=300" }).end("slow!");
    });
    try {
      const host = uniqueHost("metrics");
      await createDistribution(t, { hostname: host, origin_url: origin.url });
      const before = (await scrape(t)).samples;
      const miss = await edgeRequest(edgeUrl, "/page.txt", { host });
      const hit = await edgeRequest(edgeUrl, "/page.txt", { host });
      expect([miss.headers["x-cache"], hit.headers["x-cache"]]).toEqual(["MISS", "HIT"]);
      expect((await edgeRequest(edgeUrl, "/page.txt", { host: "unknown.example.test" })).status).toBe(404);

      // Two viewers miss the same object at once: the second waits on the first one's origin request.
      const first = edgeRequest(edgeUrl, "/slow.txt", { host });
      await waitUntil(() => origin.hitsOf("/slow.txt") === 1, 10_000, "the origin asked");
      const second = edgeRequest(edgeUrl, "/slow.txt", { host });
      await waitUntil(
        async () => value((await scrape(t)).samples, "cumulo_edge_coalesced_misses_total") > 0,
        10_000,
        "a coalesced miss",
      );
      release();
      expect((await Promise.all([first, second])).map((answer) => answer.text)).toEqual(["slow!", "slow!"]);
      expect(origin.hitsOf("/slow.txt")).toBe(1);

      const after = (await scrape(t)).samples;
      const moved = (name: string, labels: Record<string, string> = {}) =>
        value(after, name, labels) - value(before, name, labels);
      expect(moved("cumulo_edge_requests_total", { cache: "miss" })).toBe(3);
      expect(moved("cumulo_edge_requests_total", { cache: "hit" })).toBe(1);
      expect(moved("cumulo_edge_requests_total", { cache: "none" })).toBe(1);
      const notFoundBytes = Buffer.byteLength(
        JSON.stringify({ success: false, message: "Resource not found" }),
      );
      expect(moved("cumulo_edge_sent_bytes_total")).toBe(10 + 10 + notFoundBytes + 5 + 5);
      expect(moved("cumulo_edge_origin_duration_seconds_count")).toBe(2);
      expect(moved("cumulo_edge_coalesced_misses_total")).toBe(1);
    } finally {
      release();
      await origin.close();
    }
  });

  it("counts answers of library distributions apart from misses: the edge never caches them", async () => {
    const path = await libraryFileOnEdge(t, "Metrics library");
    const before = (await scrape(t)).samples;
    for (let i = 0; i < 3; i++) {
      const answer = await edgeRequest(edgeUrl, path);
      expect([answer.status, answer.headers["x-cache"]]).toEqual([200, "MISS"]);
    }
    // An answer is counted once its response has closed, which can be just after the viewer has it.
    const after = await waitUntil(async () => {
      const { samples } = await scrape(t);
      return edgeAnswers(samples) - edgeAnswers(before) >= 3 ? samples : undefined;
    });
    const moved = (name: string, labels: Record<string, string> = {}) =>
      value(after, name, labels) - value(before, name, labels);
    // Served from media storage every time, by design: not misses that a bigger cache would turn into
    // hits, so the hit ratio (hit / (hit + miss)) and its alert leave them out.
    expect(moved("cumulo_edge_requests_total", { cache: "media" })).toBe(3);
    expect(moved("cumulo_edge_requests_total", { cache: "miss" })).toBe(0);
    expect(moved("cumulo_edge_requests_total", { cache: "hit" })).toBe(0);
    expect(moved("cumulo_edge_sent_bytes_total")).toBe(3 * PNG.length);
    // Their time runs until the viewer has the whole file: not an origin's answer time.
    expect(moved("cumulo_edge_origin_duration_seconds_count")).toBe(0);
  });

  it("counts webhook attempts by outcome, and job runs by kind", async () => {
    const receiver = await startReceiver((_request, res) => res.end("ok"));
    try {
      const before = (await scrape(t)).samples;
      const libraryId = await createLibrary(t.cumulo.services, await organizationOf(t));
      const endpoint = await createEndpoint(t, libraryId, { url: `${receiver.url}/hook` });
      const sent = await t.request("POST", `${webhooksPath(libraryId)}/${endpoint.id}/test`);
      expect(sent.status).toBe(202);
      await receiver.waitFor(1);
      const after = await waitUntil(async () => {
        const { samples } = await scrape(t);
        const delivered = value(samples, "cumulo_webhook_attempts_total", { outcome: "delivered" });
        const provisioned = value(samples, "cumulo_job_runs_total", {
          kind: PROVISION,
          outcome: "succeeded",
        });
        return delivered > value(before, "cumulo_webhook_attempts_total", { outcome: "delivered" }) &&
          provisioned > value(before, "cumulo_job_runs_total", { kind: PROVISION, outcome: "succeeded" })
          ? samples
          : undefined;
      });
      const moved = (name: string, labels: Record<string, string> = {}) =>
        value(after, name, labels) - value(before, name, labels);
      expect(moved("cumulo_webhook_attempts_total", { outcome: "delivered" })).toBe(1);
      expect(moved("cumulo_webhook_attempts_total", { outcome: "refused" })).toBe(0);
      expect(moved("cumulo_webhook_attempt_duration_seconds_count")).toBe(1);
      expect(moved("cumulo_job_runs_total", { kind: PROVISION, outcome: "succeeded" })).toBe(1);
      expect(moved("cumulo_job_run_duration_seconds_count", { kind: PROVISION })).toBe(1);
    } finally {
      await receiver.close();
    }
  });

  it("reports the store's pool on PostgreSQL only", async () => {
    const { samples } = await scrape(t);
    const pooled = [...samples.keys()].some((series) => series.startsWith("cumulo_store_pool_connections"));
    expect(pooled).toBe(t.cumulo.store.dialect === "postgres");
    expect(samples.has("cumulo_redis_up")).toBe(false);
  });

  it.runIf(promtool)(
    "output passes promtool check metrics, and the example alert rules pass check rules",
    async () => {
      const { text } = await scrape(t);
      const metrics = spawnSync("promtool", ["check", "metrics"], { input: text, encoding: "utf8" });
      expect(metrics.stdout + metrics.stderr).toBe("");
      expect(metrics.status).toBe(0);
      const rules = spawnSync("promtool", ["check", "rules", RULES_FILE], { encoding: "utf8" });
      expect(rules.stderr).toBe("");
      expect(rules.stdout).toContain("SUCCESS");
      expect(rules.status).toBe(0);
    },
  );
  it.runIf(promtool)(
    "alerts on a low edge hit ratio from cacheable answers only, not from library playback (promtool test rules)",
    async () => {
      // Edge 1 serves only video playback (library distributions, never cached) at 30 requests a
      // second; edge 2 serves a URL origin's objects, 5 hits and 20 misses a second.
      const series = (instance: string, cache: string, perMinute: number) =>
        `      - series: 'cumulo_edge_requests_total{job="cumulo",instance="${instance}",cache="${cache}"}'\n` +
        `        values: '0+${perMinute}x120'\n`;
      const test = [
        `rule_files: [${JSON.stringify(RULES_FILE)}]`,
        "evaluation_interval: 1m",
        "tests:",
        "  - interval: 1m",
        "    input_series:",
        series("edge-1", "media", 1800).trimEnd(),
        series("edge-1", "hit", 0).trimEnd(),
        series("edge-1", "miss", 0).trimEnd(),
        series("edge-2", "hit", 300).trimEnd(),
        series("edge-2", "miss", 1200).trimEnd(),
        series("edge-2", "none", 600).trimEnd(),
        "    alert_rule_test:",
        "      - eval_time: 90m",
        "        alertname: CumuloEdgeHitRatioLow",
        "        exp_alerts:",
        "          - exp_labels: { severity: info, instance: edge-2 }",
        "            exp_annotations:",
        `              summary: "Edge edge-2 serves less than half of its cacheable requests from cache"`,
        "",
      ].join("\n");
      const directory = await mkdtemp(join(tmpdir(), "cumulo-rules-"));
      try {
        const file = join(directory, "hit-ratio.test.yml");
        await writeFile(file, test);
        const result = spawnSync("promtool", ["test", "rules", file], { encoding: "utf8" });
        expect(result.stdout + result.stderr).toContain("SUCCESS");
        expect(result.status, result.stdout + result.stderr).toBe(0);
      } finally {
        await rm(directory, { recursive: true, force: true });
      }
    },
  );
  it.skipIf(promtool)(
    "promtool check metrics: skipped, promtool is not on PATH (Debian package prometheus)",
    () => {},
  );
});

/** A video's uploaded thumbnail in a new library: the edge path of a library file. */
async function libraryFileOnEdge(t: TestApp, libraryName: string): Promise<string> {
  const library = await createMediaLibrary(t, { name: libraryName });
  const video = await createVideo(t, library.id);
  const poster = new FormData();
  poster.set("file", new Blob([PNG]), "poster.png");
  const uploaded = await t.request(
    "POST",
    `/v1/media/libraries/${library.id}/videos/${video.id}/thumbnails`,
    {
      body: poster,
    },
  );
  expect(uploaded.status, uploaded.text).toBe(200);
  return `/${library.id}.media.cumulo.local/${video.id}/thumbnail.jpg`;
}

describe("edge metrics when media storage fails", () => {
  it("counts the edge's 503 for a library file as an error (none), not as a library answer", async () => {
    const s3 = await startTestS3();
    let s3Closed = false;
    let t: TestApp | undefined;
    try {
      t = await startTestApp({
        ...s3.env,
        ...EDGE_ENV,
        CUMULO_METRICS_TOKEN: TOKEN,
        CUMULO_S3_TIMEOUT_MS: "2000",
        CUMULO_STORAGE_RECHECK_MS: "500",
      });
      const path = await libraryFileOnEdge(t, "Storage failing");
      const edge = t.cumulo.edgeUrl ?? "";
      expect((await edgeRequest(edge, path)).status).toBe(200);
      await s3.close();
      s3Closed = true;

      const before = (await scrape(t)).samples;
      const failed = await edgeRequest(edge, path);
      expect(failed.status).toBe(503);
      // Counted once the response has closed, which can be just after the viewer has it.
      const node = t;
      const after = await waitUntil(async () => {
        const { samples } = await scrape(node);
        return edgeAnswers(samples) > edgeAnswers(before) ? samples : undefined;
      });
      const moved = (labels: Record<string, string>) =>
        value(after, "cumulo_edge_requests_total", labels) -
        value(before, "cumulo_edge_requests_total", labels);
      // The edge's own error, as for a failing URL origin (502/504): nothing a viewer was served.
      expect(moved({ cache: "none" })).toBe(1);
      expect(moved({ cache: "media" })).toBe(0);
      expect(moved({ cache: "miss" })).toBe(0);
    } finally {
      await t?.close();
      if (!s3Closed) await s3.close();
    }
  });
});

describe("metrics read from the store", () => {
  let t: TestApp;
  beforeAll(async () => {
    // No worker: queued work stays queued.
    t = await startTestApp({
      CUMULO_ROLES: "api",
      CUMULO_METRICS_TOKEN: TOKEN,
      CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
    });
  });
  afterAll(() => t.close());

  it("reports queued jobs by kind, the oldest one's age and the webhook backlog", async () => {
    const organizationId = await organizationOf(t);
    const libraryId = await createLibrary(t.cumulo.services, organizationId);
    await createLibrary(t.cumulo.services, organizationId);
    const endpoint = await createEndpoint(t, libraryId, { url: "http://hooks.example.invalid/hook" });
    expect((await t.request("POST", `${webhooksPath(libraryId)}/${endpoint.id}/test`)).status).toBe(202);

    const { samples } = await scrape(t);
    expect(value(samples, "cumulo_jobs", { kind: PROVISION, state: "queued" })).toBe(2);
    expect(value(samples, "cumulo_jobs", { kind: PROVISION, state: "running" })).toBe(0);
    expect(value(samples, "cumulo_jobs", { kind: PROVISION, state: "failed" })).toBe(0);
    expect(samples.has(`cumulo_jobs_oldest_queued_age_seconds{kind="${PROVISION}"}`)).toBe(true);
    expect(
      value(samples, "cumulo_jobs_oldest_queued_age_seconds", { kind: PROVISION }),
    ).toBeGreaterThanOrEqual(0);
    // Kinds with nothing queued read 0 rather than vanishing.
    expect(samples.get('cumulo_jobs{kind="video.process",state="queued"}')).toBe(0);
    expect(value(samples, "cumulo_webhook_backlog", { state: "pending" })).toBe(1);
    expect(value(samples, "cumulo_webhook_backlog", { state: "sending" })).toBe(0);
  });
});

describe("metrics read from the store, cached", () => {
  it("reads the store at most once per 5 s of the clock, however often it is scraped", async () => {
    const clock = new TestClock(new Date());
    const t = await startTestApp({ CUMULO_ROLES: "api", CUMULO_METRICS_TOKEN: TOKEN }, { clock });
    try {
      const organizationId = await organizationOf(t);
      const queued = async () =>
        value((await scrape(t)).samples, "cumulo_jobs", { kind: PROVISION, state: "queued" });
      expect(await queued()).toBe(0);
      await createLibrary(t.cumulo.services, organizationId);
      expect(await queued()).toBe(0);
      clock.advance(4_999);
      expect(await queued()).toBe(0);
      clock.advance(1);
      expect(await queued()).toBe(1);
    } finally {
      await t.close();
    }
  });
});

describe("metrics exposure", () => {
  it("answers 404 on the API port when neither a port nor a token is set", async () => {
    const t = await startTestApp();
    try {
      expect((await t.request("GET", "/metrics", { anonymous: true })).status).toBe(404);
      expect(t.cumulo.metricsUrl).toBeUndefined();
    } finally {
      await t.close();
    }
  });

  it("serves /metrics only on its own listener when a port is set, with the token when one is set", async () => {
    const t = await startTestApp({ CUMULO_METRICS_PORT: "0", CUMULO_METRICS_TOKEN: TOKEN });
    try {
      const bearer = { authorization: `Bearer ${TOKEN}` };
      expect((await t.request("GET", "/metrics", { headers: bearer })).status).toBe(404);
      const metricsUrl = t.cumulo.metricsUrl ?? "";
      expect(new URL(metricsUrl).hostname).toBe("127.0.0.1");
      expect((await fetch(`${metricsUrl}/metrics`)).status).toBe(401);
      const scraped = await fetch(`${metricsUrl}/metrics`, { headers: bearer });
      expect(scraped.status).toBe(200);
      expect(await scraped.text()).toContain("cumulo_http_requests_total");
      expect((await fetch(`${metricsUrl}/other`, { headers: bearer })).status).toBe(404);
      expect((await fetch(`${metricsUrl}/metrics`, { method: "POST", headers: bearer })).status).toBe(404);
    } finally {
      await t.close();
    }
  });

  it("refuses to start when the metrics port is taken, naming the variables", async () => {
    const first = await startTestApp({ CUMULO_METRICS_PORT: "0" });
    const store = await createMigratedTestStore();
    try {
      const taken = new URL(first.cumulo.metricsUrl ?? "").port;
      await expect(startTestApp({ CUMULO_METRICS_PORT: taken }, { store })).rejects.toThrow(
        "(CUMULO_METRICS_HOST, CUMULO_METRICS_PORT)",
      );
    } finally {
      await first.close();
      await store.drop();
    }
  });

  it("answers the health probes on the metrics listener of nodes without an API port", async () => {
    const store = await createMigratedTestStore();
    const nodes = [
      await startTestApp({ CUMULO_ROLES: "worker", CUMULO_METRICS_PORT: "0" }, { store }),
      await startTestApp(
        {
          CUMULO_ROLES: "edge",
          CUMULO_EDGE_PORT: "0",
          CUMULO_METRICS_PORT: "0",
          CUMULO_METRICS_TOKEN: TOKEN,
        },
        { store },
      ),
    ];
    try {
      for (const node of nodes) {
        const health = await fetch(`${node.cumulo.metricsUrl}/healthz`);
        expect([health.status, await health.json()]).toEqual([200, { status: "ok" }]);
        const ready = await fetch(`${node.cumulo.metricsUrl}/readyz?probe=1`);
        expect([ready.status, await ready.json()]).toEqual([200, { status: "ready" }]);
        expect((await fetch(`${node.cumulo.metricsUrl}/readyz`, { method: "POST" })).status).toBe(404);
      }
      // The token guards the metrics, not the probes.
      expect((await fetch(`${nodes[1]?.cumulo.metricsUrl}/metrics`)).status).toBe(401);
    } finally {
      for (const node of nodes) await node.close();
      await store.drop();
    }
  });

  it("answers 503 stopping on the metrics listener's /readyz once the node shuts down", async () => {
    // An edge-only node's balancer probes here: from SIGTERM on, its edge listener takes no
    // connection, while this listener stays open until the grace and the workers are through.
    const node = await startTestApp({
      CUMULO_ROLES: "edge",
      CUMULO_EDGE_PORT: "0",
      CUMULO_METRICS_PORT: "0",
      CUMULO_SHUTDOWN_GRACE_MS: "30000",
      CUMULO_KEEP_ALIVE_TIMEOUT_MS: "60000",
    });
    // A viewer's idle keep-alive connection holds the edge's grace, and with it the shutdown.
    const viewer = connect(Number(new URL(node.cumulo.edgeUrl ?? "").port), "127.0.0.1");
    const answered = new Promise((resolve) => viewer.once("data", resolve));
    viewer.write("GET /healthz HTTP/1.1\r\nHost: unknown.example\r\n\r\n");
    await answered;
    const closed = node.close();
    try {
      const ready = await fetch(`${node.cumulo.metricsUrl}/readyz`);
      expect([ready.status, await ready.json()]).toEqual([503, { status: "stopping" }]);
      // Liveness is unchanged: the process still runs, and must not be killed for shutting down.
      expect((await fetch(`${node.cumulo.metricsUrl}/healthz`)).status).toBe(200);
    } finally {
      viewer.destroy();
      await closed;
    }
  });

  it("exports on each node only the metrics its roles record", { timeout: 90_000 }, async () => {
    const api = [
      "cumulo_http_requests_total",
      "cumulo_http_request_duration_seconds",
      "cumulo_rate_limit_refusals_total",
    ];
    const worker = [
      "cumulo_job_runs_total",
      "cumulo_job_run_duration_seconds",
      "cumulo_webhook_attempts_total",
      "cumulo_webhook_attempt_duration_seconds",
      "cumulo_ffmpeg_runs_total",
      "cumulo_ffmpeg_run_duration_seconds",
    ];
    const edge = [
      "cumulo_edge_requests_total",
      "cumulo_edge_sent_bytes_total",
      "cumulo_edge_origin_duration_seconds",
      "cumulo_edge_coalesced_misses_total",
    ];
    const everyNode = [
      "cumulo_build_info",
      "cumulo_store_query_duration_seconds",
      "cumulo_jobs",
      "cumulo_webhook_backlog",
    ];
    const store = await createMigratedTestStore();
    const nodes = {
      api: await startTestApp({ CUMULO_ROLES: "api", CUMULO_METRICS_PORT: "0" }, { store }),
      worker: await startTestApp({ CUMULO_ROLES: "worker", CUMULO_METRICS_PORT: "0" }, { store }),
      edge: await startTestApp(
        { CUMULO_ROLES: "edge", CUMULO_EDGE_PORT: "0", CUMULO_METRICS_PORT: "0" },
        { store },
      ),
      "api,worker,edge": await startTestApp({ CUMULO_EDGE_PORT: "0", CUMULO_METRICS_PORT: "0" }, { store }),
      // The edge role without a port runs nothing.
      "api,worker": await startTestApp({ CUMULO_EDGE_PORT: "off", CUMULO_METRICS_PORT: "0" }, { store }),
    };
    const recorded = { api, worker, edge };
    try {
      for (const [roles, node] of Object.entries(nodes)) {
        const text = await (await fetch(`${node.cumulo.metricsUrl}/metrics`)).text();
        const exported = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1]));
        for (const [role, names] of Object.entries(recorded)) {
          for (const name of names)
            expect([roles, name, exported.has(name)]).toEqual([roles, name, roles.includes(role)]);
        }
        for (const name of everyNode) expect([roles, name, exported.has(name)]).toEqual([roles, name, true]);
      }
    } finally {
      for (const node of Object.values(nodes)) await node.close();
      await store.drop();
    }
  });

  it("serves a worker-only node's metrics on its own listener without a token", async () => {
    const t = await startTestApp({ CUMULO_ROLES: "worker", CUMULO_METRICS_PORT: "0" });
    try {
      const scraped = await fetch(`${t.cumulo.metricsUrl}/metrics`);
      expect(scraped.status).toBe(200);
      expect(await scraped.text()).toContain(`cumulo_jobs{kind="${PROVISION}",state="queued"} 0`);
    } finally {
      await t.close();
    }
  });
});

describe("metric series", () => {
  it("reads the pool before the scrape's own store queries ask it for connections", async () => {
    // As pg-pool does: a query asking for a connection waits in its queue until the next tick, even
    // when an idle connection is there.
    const pool = { totalCount: 2, idleCount: 2, waitingCount: 0 };
    const query = <T>(rows: T[]) => {
      pool.waitingCount++;
      return new Promise<T[]>((resolve) =>
        process.nextTick(() => {
          pool.waitingCount--;
          resolve(rows);
        }),
      );
    };
    const metrics = new Metrics({ processMetrics: false });
    metrics.observe({
      clock: { now: () => new Date() },
      jobKinds: [],
      jobs: { unfinishedByKind: () => query([]) },
      webhookBacklog: () => query([]),
      pool,
      redis: undefined,
      geoipBuiltAt: () => undefined,
    });
    const samples = parseSamples((await metrics.render()).body);
    expect(value(samples, "cumulo_store_pool_waiting_requests")).toBe(0);
    expect(value(samples, "cumulo_store_pool_connections", { state: "idle" })).toBe(2);
  });

  it("keeps one duration series per route, method and status class", async () => {
    const metrics = new Metrics({ processMetrics: false });
    metrics.httpResponse("/v1/things", "POST", 201, 2);
    metrics.httpResponse("/v1/things", "POST", 200, 4);
    metrics.httpResponse("/v1/things", "POST", 400, 1);
    const text = (await metrics.render()).body;
    const samples = parseSamples(text);
    const labels = { route: "/v1/things", method: "POST" };
    expect(
      value(samples, "cumulo_http_request_duration_seconds_count", { ...labels, status_class: "2xx" }),
    ).toBe(2);
    expect(
      value(samples, "cumulo_http_request_duration_seconds_sum", { ...labels, status_class: "2xx" }),
    ).toBe(0.006);
    expect(
      value(samples, "cumulo_http_request_duration_seconds_count", { ...labels, status_class: "4xx" }),
    ).toBe(1);
    expect(text.match(/cumulo_http_request_duration_seconds_count/g)?.length).toBe(2);
    expect(value(samples, "cumulo_http_requests_total", { ...labels, status: "201" })).toBe(1);
    expect(value(samples, "cumulo_http_requests_total", { ...labels, status: "200" })).toBe(1);
    // Buckets are cumulative: 2 ms is under 2.5 ms, both are under 5 ms.
    expect(
      value(samples, "cumulo_http_request_duration_seconds_bucket", {
        le: "0.0025",
        ...labels,
        status_class: "2xx",
      }),
    ).toBe(1);
    expect(
      value(samples, "cumulo_http_request_duration_seconds_bucket", {
        le: "0.005",
        ...labels,
        status_class: "2xx",
      }),
    ).toBe(2);
  });

  it("counts a route's 500s on the series made for it at start, once", async () => {
    const metrics = new Metrics({ processMetrics: false });
    metrics.routeAdded("/v1/things", "POST");
    const series = 'cumulo_http_requests_total{route="/v1/things",method="POST",status="500"}';
    expect(parseSamples((await metrics.render()).body).get(series)).toBe(0);
    metrics.httpResponse("/v1/things", "POST", 500, 3);
    metrics.httpResponse("/v1/things", "POST", 500, 3);
    const text = (await metrics.render()).body;
    expect(parseSamples(text).get(series)).toBe(2);
    expect(text.split("\n").filter((line) => line.startsWith(series))).toHaveLength(1);
  });
});

describe("ffmpeg metrics", () => {
  it("counts runs by tool and outcome", async () => {
    const metrics = new Metrics({ processMetrics: false });
    const tools = new MediaTools(locateMediaTools(), {
      concurrency: 1,
      timeoutMs: 60_000,
      onRun: metrics.mediaToolRun,
    });
    const directory = await mkdtemp(join(tmpdir(), "cumulo-metrics-"));
    try {
      const clip = await generateClip(directory, { seconds: 1, width: 64, height: 48, audio: false });
      await tools.ffmpeg(["-i", clip, "-frames:v", "1", join(directory, "frame.jpg")]);
      await tools.probe(clip);
      await expect(tools.probe(join(directory, "missing.mp4"))).rejects.toThrow();
      const samples = parseSamples((await metrics.render()).body);
      expect(value(samples, "cumulo_ffmpeg_runs_total", { tool: "ffmpeg", outcome: "succeeded" })).toBe(1);
      expect(value(samples, "cumulo_ffmpeg_runs_total", { tool: "ffprobe", outcome: "succeeded" })).toBe(1);
      expect(value(samples, "cumulo_ffmpeg_runs_total", { tool: "ffprobe", outcome: "failed" })).toBe(1);
      expect(value(samples, "cumulo_ffmpeg_run_duration_seconds_count", { tool: "ffprobe" })).toBe(2);
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

describe.runIf(process.env.TEST_REDIS_URL)("metrics with Redis", () => {
  it("reports the Redis connection as up", async () => {
    const t = await startTestApp({
      REDIS_URL: process.env.TEST_REDIS_URL ?? "",
      CUMULO_METRICS_TOKEN: TOKEN,
    });
    try {
      expect(value((await scrape(t)).samples, "cumulo_redis_up")).toBe(1);
    } finally {
      await t.close();
    }
  });
});
