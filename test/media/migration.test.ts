import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MigrationCredentialValidator } from "../../src/media/migration-validator.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createLibrary, fieldErrors } from "./helpers.ts";

/** A fake provider: the token decides the answer. */
function fakeProvider(): Promise<{ server: Server; url: string; seen: { path: string; auth?: string }[] }> {
  const seen: { path: string; auth?: string }[] = [];
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://x");
    const token =
      url.searchParams.get("access_token") ?? request.headers.authorization?.replace("Bearer ", "") ?? "";
    seen.push({
      path: url.pathname,
      ...(request.headers.authorization ? { auth: request.headers.authorization } : {}),
    });
    const [kind] = token.split("-");
    if (kind === "slow") return void setTimeout(() => response.end("{}"), 3000);
    if (kind === "redirect") return void response.writeHead(302, { location: "/elsewhere" }).end();
    if (kind === "garbled") return void response.writeHead(200).end("<html>Service unavailable</html>");
    if (kind === "drip") {
      // A 200 whose body never ends: a byte every 100 ms.
      response.writeHead(200, { "content-type": "application/json" });
      const timer = setInterval(() => response.write(" "), 100);
      return void response.on("close", () => clearInterval(timer));
    }
    const status =
      { good: 200, bad: 401, forbidden: 403, limited: 429, broken: 503, inactive: 200 }[kind ?? ""] ?? 400;
    const body =
      url.pathname === "/client/v4/user/tokens/verify"
        ? { success: true, result: { status: kind === "inactive" ? "disabled" : "active" } }
        : { ok: true };
    response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen }),
    ),
  );
}

describe("migration credential validation", () => {
  let t: TestApp;
  let provider: Awaited<ReturnType<typeof fakeProvider>>;
  let path: string;
  beforeAll(async () => {
    provider = await fakeProvider();
    const env: Record<string, string> = {};
    for (const name of ["VIMEO", "WISTIA", "YOUTUBE", "DAILYMOTION", "CLOUDFLARE"]) {
      env[`CUMULO_PROVIDER_${name}_URL`] = provider.url;
    }
    t = await startTestApp(env);
    path = `/v1/media/libraries/${(await createLibrary(t)).id}/migration-jobs/validate`;
  });
  afterAll(async () => {
    await t.close();
    provider.server.closeAllConnections();
    await new Promise((resolve) => provider.server.close(resolve));
  });

  const check = (provider: string, token: string) =>
    t.request("POST", path, { json: { provider, credentials: { access_token: token } } });

  it("accepts a token the provider accepts, calling its verification endpoint", async () => {
    const expected: Record<string, string> = {
      vimeo: "/oauth/verify",
      wistia: "/v1/account.json",
      youtube: "/tokeninfo",
      dailymotion: "/auth",
      cloudflare: "/client/v4/user/tokens/verify",
    };
    for (const [name, endpoint] of Object.entries(expected)) {
      provider.seen.length = 0;
      const response = await check(name, "good-token");
      expect(response.status).toBe(200);
      expect(response.body).toEqual({ success: true, message: "Credentials are valid" });
      expect(provider.seen[0]?.path).toBe(endpoint);
      expect(provider.seen[0]?.auth).toBe(name === "youtube" ? undefined : "Bearer good-token");
    }
  });

  it("reports a rejected token on credentials.access_token", async () => {
    for (const [name, token] of [
      ["vimeo", "bad-1"],
      ["wistia", "forbidden-1"],
      ["youtube", "other-1"],
      ["cloudflare", "inactive-1"],
    ] as const) {
      const response = await check(name, token);
      expect(response.status).toBe(400);
      expect(response.body).toEqual({
        success: false,
        message: "Invalid Request",
        errors: [
          { field: "credentials.access_token", code: "validation_credentials", message: expect.any(String) },
        ],
      });
    }
  });

  it("refuses a token no header can carry as malformed, without asking the provider", async () => {
    // It was reported as rejected by the provider, which never saw it (QA of 4 December, session 41).
    for (const [name, token] of [
      ["vimeo", "good-1\nX-Other: 1"],
      ["dailymotion", "good-\u0100"],
    ] as const) {
      const response = await check(name, token);
      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual([
        {
          field: "credentials.access_token",
          code: "validation_format",
          message: expect.stringMatching(/characters/),
        },
      ]);
    }
  });

  it("answers 502 {} when the provider cannot answer", async () => {
    for (const token of ["limited-1", "broken-1", "redirect-1"]) {
      const response = await check("vimeo", token);
      expect(response.status).toBe(502);
      expect(response.body).toEqual({});
    }
  });

  it("answers 502 {} when a Cloudflare answer to check cannot be read, not a rejected token", async () => {
    const response = await check("cloudflare", "garbled-1");
    expect(response.status).toBe(502);
    expect(response.body).toEqual({});
  });

  it("answers from the status alone without waiting for a body it does not need", async () => {
    const validator = new MigrationCredentialValidator(t.config.providerUrls, 3000);
    const started = Date.now();
    expect(await validator.validate("vimeo", "drip-1")).toEqual({ outcome: "valid" });
    expect(Date.now() - started).toBeLessThan(1500);
    // Cloudflare's answer is in the body, so a body that never ends is a provider that did not answer.
    const quick = new MigrationCredentialValidator(t.config.providerUrls, 300);
    expect(await quick.validate("cloudflare", "drip-1")).toEqual({ outcome: "unavailable" });
  });

  it("validates the request body", async () => {
    const bad = await t.request("POST", path, { json: { provider: "myspace", credentials: {} } });
    expect(fieldErrors(bad.body)).toEqual({
      provider: "validation_enum",
      "credentials.access_token": "validation_required",
    });
    const missing = await t.request("POST", path, { json: {} });
    expect(fieldErrors(missing.body)).toEqual({
      provider: "validation_required",
      credentials: "validation_required",
    });
  });

  it("gives up after the timeout, and when nothing listens", async () => {
    const quick = new MigrationCredentialValidator(t.config.providerUrls, 200);
    const started = Date.now();
    expect(await quick.validate("vimeo", "slow-1")).toEqual({ outcome: "unavailable" });
    expect(Date.now() - started).toBeLessThan(2000);
    const closed = new MigrationCredentialValidator(
      { ...t.config.providerUrls, vimeo: "http://127.0.0.1:1" },
      200,
    );
    expect(await closed.validate("vimeo", "good-1")).toEqual({ outcome: "unavailable" });
  });
});
