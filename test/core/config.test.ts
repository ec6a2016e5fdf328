import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig, parseRateLimit } from "../../src/config.ts";

describe("configuration", () => {
  it("has the contract's defaults", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: "127.0.0.1",
      edgePort: 8081,
      roles: ["api", "worker", "edge"],
      edgeUrlStyle: "path",
      mediaDomain: "media.cumulo.local",
      webhookAllowPrivate: false,
      originAllowPrivate: false,
      rateLimit: { max: 600, windowMs: 60_000 },
      logLevel: "info",
      regions: ["eu-central", "us-east", "ap-southeast"],
      redisPrefix: "cumulo:",
      pgPreparedStatements: true,
      keptAnswers: true,
      dataDirMode: "private",
    });
    expect(config.dataDir.endsWith("/data")).toBe(true);
    expect(config.locations.map((location) => location.slug)).toEqual(["local-1"]);
    expect(config.databaseUrl).toBeUndefined();
    expect(config.limits.webhookEndpointsPerLibrary).toBe(100);
    expect(loadConfig({ CUMULO_WEBHOOK_ENDPOINTS_MAX: "5" }).limits.webhookEndpointsPerLibrary).toBe(5);
  });

  it("parses rate limits in seconds, minutes and hours", () => {
    expect(parseRateLimit("10/30s")).toEqual({ max: 10, windowMs: 30_000 });
    expect(parseRateLimit("100/1m")).toEqual({ max: 100, windowMs: 60_000 });
    expect(parseRateLimit("5000/1h")).toEqual({ max: 5000, windowMs: 3_600_000 });
    expect(parseRateLimit("0/1m")).toBeUndefined();
    expect(parseRateLimit("10/1d")).toBeUndefined();
    expect(parseRateLimit("1000000000/24h")).toEqual({ max: 1_000_000_000, windowMs: 86_400_000 });
    // Past what Redis can count and expire, or what the headers can say.
    expect(parseRateLimit("5/99999999999h")).toBeUndefined();
    expect(parseRateLimit("5/25h")).toBeUndefined();
    expect(parseRateLimit("99999999999999999999999/1s")).toBeUndefined();
    expect(parseRateLimit("1000000001/1s")).toBeUndefined();
  });

  it("names the variable of a bad value", () => {
    const cases: Record<string, string> = {
      PORT: "http",
      CUMULO_EDGE_PORT: "70000",
      DATABASE_URL: "mysql://x",
      REDIS_URL: "not a url",
      CUMULO_BOOTSTRAP_API_KEY: "short",
      CUMULO_ROLES: "api,cache",
      CUMULO_EDGE_URL_STYLE: "virtual",
      CUMULO_WEBHOOK_ALLOW_PRIVATE: "maybe",
      CUMULO_WEBHOOK_ENDPOINTS_MAX: "0",
      CUMULO_RATE_LIMIT: "600 per minute",
      CUMULO_FAILED_AUTH_RATE_LIMIT: "30 a minute",
      CUMULO_LOG_LEVEL: "loud",
      CUMULO_MEDIA_DOMAIN: "bad domain",
      CUMULO_REDIS_PREFIX: "two words",
      CUMULO_PG_PREPARED_STATEMENTS: "maybe",
      CUMULO_METRICS_PORT: "metrics",
      CUMULO_METRICS_TOKEN: "short",
      CUMULO_TRUST_PROXY: "10.0.0.0/8,the load balancer",
      CUMULO_PUBLIC_IPS_PER_ORGANIZATION: "0",
      CUMULO_CDN_HOSTNAME_VERIFICATION: "txt",
      CUMULO_DNS_SERVERS: "127.0.0.1:53,dns.example.com",
      CUMULO_CDN_HOSTNAME_CLAIM_TTL_HOURS: "0",
      CUMULO_DATA_DIR_MODE: "0700",
      // Found only at listen, after the store and the default organization were made (QA of 4 December).
      HOST: "999.1.1.1",
      CUMULO_METRICS_HOST: "::zz",
    };
    for (const [name, value] of Object.entries(cases)) {
      expect(() => loadConfig({ [name]: value }), name).toThrow(ConfigError);
      expect(() => loadConfig({ [name]: value }), name).toThrow(name);
    }
    for (const roles of [",", " , "]) {
      expect(() => loadConfig({ CUMULO_ROLES: roles })).toThrow("CUMULO_ROLES names no role");
    }
    expect(() => loadConfig({ CUMULO_RATE_LIMIT: "5/99999999999h" })).toThrow("CUMULO_RATE_LIMIT");
    for (const server of ["127.0.0.1:0", "127.0.0.1:65536", "[::1]", "::1:53x"]) {
      expect(() => loadConfig({ CUMULO_DNS_SERVERS: server }), server).toThrow("CUMULO_DNS_SERVERS");
    }
  });

  it("reads host name verification and the DNS servers it asks", () => {
    expect(loadConfig({})).toMatchObject({
      cdnHostnameVerification: "off",
      cdnHostnameClaimTtlMs: 72 * 3_600_000,
      dnsServers: undefined,
    });
    expect(loadConfig({ CUMULO_CDN_HOSTNAME_CLAIM_TTL_HOURS: "2" }).cdnHostnameClaimTtlMs).toBe(7_200_000);
    for (const hours of ["1.5", "-1", "876001"]) {
      expect(() => loadConfig({ CUMULO_CDN_HOSTNAME_CLAIM_TTL_HOURS: hours }), hours).toThrow(
        "CUMULO_CDN_HOSTNAME_CLAIM_TTL_HOURS",
      );
    }
    const dns = loadConfig({
      CUMULO_CDN_HOSTNAME_VERIFICATION: "dns",
      CUMULO_DNS_SERVERS: "10.0.0.53, 127.0.0.1:5353,[::1]:53,::1",
    });
    expect(dns).toMatchObject({
      cdnHostnameVerification: "dns",
      dnsServers: ["10.0.0.53", "127.0.0.1:5353", "[::1]:53", "::1"],
    });
  });

  it("gives every location a public pool of its own, and refuses pools that overlap", () => {
    const pools = loadConfig({ CUMULO_LOCATIONS: "a,b,c,d,e" }).locations.map(
      (location) => location.publicPool,
    );
    // The third and later locations shared the second's pool: one address, two floating IPs.
    expect(pools).toEqual([
      "203.0.113.0/24",
      "198.51.100.0/24",
      "192.0.2.0/24",
      "198.18.0.0/24",
      "198.18.1.0/24",
    ]);
    expect(() =>
      loadConfig({
        CUMULO_LOCATIONS: "eu-1,us-1",
        CUMULO_LOCATION_EU_1_PUBLIC_POOL: "198.51.0.0/16",
        CUMULO_LOCATION_US_1_PUBLIC_POOL: "198.51.100.0/24",
      }),
    ).toThrow(
      "CUMULO_LOCATION_US_1_PUBLIC_POOL is 198.51.100.0/24, which overlaps eu-1's public pool 198.51.0.0/16",
    );
    expect(() =>
      loadConfig({ CUMULO_LOCATIONS: "eu-1,us-1", CUMULO_LOCATION_US_1_PUBLIC_POOL: "203.0.113.128/25" }),
    ).toThrow(ConfigError);
  });

  it("refuses waits longer than Node's timers can measure, and sizes past a safe integer", () => {
    // A timer longer than 2^31 - 1 ms fires after 1 ms: a 3e9 ms poll would poll without pause.
    for (const name of [
      "CUMULO_WEBHOOK_POLL_MS",
      "CUMULO_EDGE_ANALYTICS_FLUSH_MS",
      "CUMULO_SHUTDOWN_GRACE_MS",
      "CUMULO_STORAGE_RECHECK_MS",
      "CUMULO_REDIS_START_TIMEOUT_MS",
      "CUMULO_PG_CONNECT_TIMEOUT_MS",
    ]) {
      expect(() => loadConfig({ [name]: "3000000000" }), name).toThrow(`${name} must be at most 2147483647`);
      expect(loadConfig({ [name]: "2147483647" }), name).toBeDefined();
    }
    expect(() => loadConfig({ CUMULO_FFMPEG_TIMEOUT_S: "2147484" })).toThrow("CUMULO_FFMPEG_TIMEOUT_S");
    expect(loadConfig({ CUMULO_FFMPEG_TIMEOUT_S: "2147483" }).video.ffmpegTimeoutMs).toBe(2_147_483_000);
    expect(() => loadConfig({ CUMULO_MAX_VIDEO_BYTES: "99999999999999999999999" })).toThrow(
      "CUMULO_MAX_VIDEO_BYTES",
    );
  });

  it("checks storage that was away again every 10 s, as long as its 503s' Retry-After, unless told otherwise", () => {
    expect(loadConfig({}).storageRecheckMs).toBe(10_000);
    expect(loadConfig({ CUMULO_STORAGE_RECHECK_MS: "250" }).storageRecheckMs).toBe(250);
    expect(() => loadConfig({ CUMULO_STORAGE_RECHECK_MS: "0" })).toThrow("CUMULO_STORAGE_RECHECK_MS");
  });

  it("waits 10 s at start for Redis to answer, unless told otherwise", () => {
    expect(loadConfig({}).redisStartTimeoutMs).toBe(10_000);
    expect(loadConfig({ CUMULO_REDIS_START_TIMEOUT_MS: "1500" }).redisStartTimeoutMs).toBe(1500);
  });

  it("gives a new PostgreSQL connection 10 s to be ready, unless told otherwise", () => {
    expect(loadConfig({}).pgConnectTimeoutMs).toBe(10_000);
    expect(loadConfig({ CUMULO_PG_CONNECT_TIMEOUT_MS: "2500" }).pgConnectTimeoutMs).toBe(2500);
  });

  it("accepts port 0, edge off and a bootstrap key of the allowed alphabet", () => {
    const config = loadConfig({
      PORT: "0",
      CUMULO_EDGE_PORT: "off",
      CUMULO_BOOTSTRAP_API_KEY: "abc_DEF-0123456789xyz",
    });
    expect(config.port).toBe(0);
    expect(config.edgePort).toBe("off");
    expect(config.bootstrapApiKey).toBe("abc_DEF-0123456789xyz");
  });

  it("refuses an edge-only node whose edge listener is off: it would run nothing", () => {
    // Before, it started, printed "Cumulo ready (roles: )" and served nothing.
    for (const roles of ["edge", "edge,edge", " edge "]) {
      expect(() => loadConfig({ CUMULO_ROLES: roles, CUMULO_EDGE_PORT: "off" }), roles).toThrow(
        "Invalid configuration: CUMULO_EDGE_PORT is off, and CUMULO_ROLES names no other role than edge: this node would run nothing",
      );
    }
    // With another role, off only leaves the edge out (the documented way to run without it).
    expect(loadConfig({ CUMULO_ROLES: "api,edge", CUMULO_EDGE_PORT: "off" }).roles).toEqual(["api", "edge"]);
    expect(loadConfig({ CUMULO_EDGE_PORT: "off" }).edgePort).toBe("off");
    expect(loadConfig({ CUMULO_ROLES: "edge", CUMULO_EDGE_PORT: "0" }).edgePort).toBe(0);
  });

  it("refuses a metrics token on a node without an API port when no metrics port is set", () => {
    // Before, a worker or edge node given the deployment's token started and served /metrics nowhere.
    for (const roles of ["worker", "edge", "worker,edge"]) {
      expect(
        () => loadConfig({ CUMULO_ROLES: roles, CUMULO_METRICS_TOKEN: "scrape-token-0123456789" }),
        roles,
      ).toThrow(
        "Invalid configuration: CUMULO_METRICS_TOKEN is set, but this node runs no api role, whose port would serve /metrics: set CUMULO_METRICS_PORT too",
      );
    }
    const worker = loadConfig({
      CUMULO_ROLES: "worker",
      CUMULO_METRICS_TOKEN: "scrape-token-0123456789",
      CUMULO_METRICS_PORT: "0",
    });
    expect(worker.metrics.port).toBe(0);
    expect(
      loadConfig({ CUMULO_ROLES: "api", CUMULO_METRICS_TOKEN: "scrape-token-0123456789" }).metrics.port,
    ).toBe(undefined);
  });

  it("refuses one port for two listeners of the node, naming both variables", () => {
    // Before, start-up failed with EADDRINUSE naming only the listener that bound second, so the
    // operator looked for another program holding a port this node had taken itself.
    expect(() => loadConfig({ PORT: "9100", CUMULO_METRICS_PORT: "9100" })).toThrow(
      "Invalid configuration: CUMULO_METRICS_PORT is 9100, the port of PORT too: each listener of a node needs a port of its own",
    );
    expect(() => loadConfig({ PORT: "9100", CUMULO_EDGE_PORT: "9100" })).toThrow(
      "CUMULO_EDGE_PORT is 9100, the port of PORT too",
    );
    expect(() =>
      loadConfig({ CUMULO_EDGE_PORT: "9101", CUMULO_METRICS_PORT: "9101", CUMULO_METRICS_HOST: "0.0.0.0" }),
    ).toThrow("CUMULO_METRICS_PORT is 9101, the port of CUMULO_EDGE_PORT too");
    // Listeners this node does not open, port 0, and distinct addresses share nothing.
    expect(loadConfig({ CUMULO_ROLES: "worker,edge", PORT: "9100", CUMULO_EDGE_PORT: "9100" }).port).toBe(
      9100,
    );
    expect(
      loadConfig({ PORT: "9100", CUMULO_EDGE_PORT: "off", CUMULO_ROLES: "api", CUMULO_METRICS_PORT: "9101" })
        .metrics.port,
    ).toBe(9101);
    expect(loadConfig({ PORT: "0", CUMULO_EDGE_PORT: "0", CUMULO_METRICS_PORT: "0" }).port).toBe(0);
    expect(
      loadConfig({
        HOST: "10.0.0.5",
        CUMULO_METRICS_HOST: "127.0.0.1",
        PORT: "9100",
        CUMULO_METRICS_PORT: "9100",
      }).metrics.port,
    ).toBe(9100);
  });

  it("keeps /metrics off by default; a port, a host and a token turn it on", () => {
    expect(loadConfig({}).metrics).toEqual({ port: undefined, host: "127.0.0.1", token: undefined });
    expect(loadConfig({ CUMULO_METRICS_PORT: "off" }).metrics.port).toBeUndefined();
    const config = loadConfig({
      CUMULO_METRICS_PORT: "9464",
      CUMULO_METRICS_HOST: "0.0.0.0",
      CUMULO_METRICS_TOKEN: "scrape-token-0123456789",
    });
    expect(config.metrics).toEqual({ port: 9464, host: "0.0.0.0", token: "scrape-token-0123456789" });
    expect(() => loadConfig({ CUMULO_METRICS_TOKEN: "has a space in it 0123" })).toThrow(
      "CUMULO_METRICS_TOKEN",
    );
  });
});
