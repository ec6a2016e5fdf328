import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { startCumulo } from "../../src/roles.ts";
import { startTestApp } from "../support/app.ts";

describe("start-up and health", () => {
  it("builds playback URLs on the edge port chosen when CUMULO_EDGE_PORT=0", async () => {
    const t = await startTestApp({ CUMULO_EDGE_PORT: "0" });
    try {
      const edgeUrl = t.cumulo.edgeUrl ?? "";
      expect(edgeUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(edgeUrl.endsWith(":0")).toBe(false);
      const library = await t.request("POST", "/v1/media/libraries", { json: { name: "Edge port" } });
      const video = await t.request("POST", `/v1/media/libraries/${library.body.data.id}/videos`, {
        json: { title: "clip" },
      });
      const token = await t.request(
        "POST",
        `/v1/media/libraries/${library.body.data.id}/videos/${video.body.data.id}/playback-token`,
      );
      expect(token.status).toBe(201);
      expect(token.body.data.manifest_url.startsWith(`${edgeUrl}/`)).toBe(true);
      // The caller's config is left as given.
      expect(t.config.edgePublicUrl).toBeUndefined();
    } finally {
      await t.close();
    }
  });

  it("names the variables to change when a listener cannot bind", async () => {
    const t = await startTestApp();
    try {
      const port = new URL(t.baseUrl).port;
      const clash = loadConfig({
        PORT: port,
        CUMULO_EDGE_PORT: "off",
        CUMULO_ROLES: "api",
        CUMULO_LOG_LEVEL: "silent",
        CUMULO_DATA_DIR: t.store.dataDir,
        CUMULO_REDIS_PREFIX: t.store.redisPrefix,
        ...(t.store.databaseUrl ? { DATABASE_URL: t.store.databaseUrl } : {}),
      });
      await expect(startCumulo(clash)).rejects.toThrow(
        new RegExp(`^cannot listen on 127\\.0\\.0\\.1:${port} \\(HOST, PORT\\): .*EADDRINUSE`),
      );
    } finally {
      await t.close();
    }
  });

  it("names the variable when the store cannot be opened", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cumulo-store-"));
    try {
      writeFileSync(join(dir, "file"), "");
      const config = loadConfig({
        PORT: "0",
        CUMULO_EDGE_PORT: "off",
        CUMULO_LOG_LEVEL: "silent",
        CUMULO_DATA_DIR: join(dir, "file", "data"),
      });
      // Every role writes there, whatever the store: checked before the store is opened.
      await expect(startCumulo(config)).rejects.toThrow(
        /^cannot write to the data dir \S+ \(CUMULO_DATA_DIR\): /,
      );
      const unreachable = loadConfig({
        PORT: "0",
        CUMULO_EDGE_PORT: "off",
        CUMULO_LOG_LEVEL: "silent",
        CUMULO_DATA_DIR: dir,
        DATABASE_URL: "postgres://nobody@127.0.0.1:1/nothing",
      });
      await expect(startCumulo(unreachable)).rejects.toThrow(/^cannot open the store \(DATABASE_URL\): /);
      // A server that takes the connection and never answers (a wrong port): it failed, not hung.
      const silent = createNetServer(() => undefined);
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
      try {
        const { port } = silent.address() as AddressInfo;
        const hanging = loadConfig({
          PORT: "0",
          CUMULO_EDGE_PORT: "off",
          CUMULO_LOG_LEVEL: "silent",
          CUMULO_DATA_DIR: dir,
          DATABASE_URL: `postgres://nobody@127.0.0.1:${port}/nothing`,
          // 1 s rather than the default 10 s.
          CUMULO_PG_CONNECT_TIMEOUT_MS: "1000",
        });
        await expect(startCumulo(hanging)).rejects.toThrow(
          "cannot open the store (DATABASE_URL): Migrating failed: Connection terminated due to connection timeout",
        );
      } finally {
        silent.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("answers 503 on /readyz and an unhealthy livestream health once the store is gone", async () => {
    const t = await startTestApp();
    try {
      expect((await t.request("GET", "/v1/livestream/health")).body).toEqual({ status: "healthy" });
      await t.cumulo.store.close();
      const ready = await t.request("GET", "/readyz", { anonymous: true });
      expect(ready.status).toBe(503);
      const health = await t.request("GET", "/v1/livestream/health");
      expect(health.status).toBe(503);
      expect(health.body).toEqual({ status: "unhealthy" });
      // Expected refusals keep their own answers.
      const anonymous = await t.request("GET", "/v1/livestream/health", { anonymous: true });
      expect(anonymous.status).toBe(401);
      expect(anonymous.body).toMatchObject({ success: false, code: "auth_type_not_found" });
    } finally {
      await t.close().catch(() => undefined);
    }
  });
});
