import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { capturingLogger } from "../fuzz/log-capture.ts";
import { ADMIN_KEY, startTestApp, type TestApp } from "../support/app.ts";

describe("request log at info", () => {
  let t: TestApp;
  const { logger, lines } = capturingLogger("info");
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_ROLES: "api" }, { logger });
  });
  afterAll(() => t.close());

  const linesOf = (reqId: string) => lines.filter((line) => line.reqId === reqId);

  it("writes one line per request, when it completes, with its method, URL, status, time and id", async () => {
    const read = await t.request("GET", "/v1/media/libraries?limit=1", {
      headers: { "x-request-id": "log-read" },
    });
    expect(read.status).toBe(200);
    const missing = await t.request("GET", "/v1/media/libraries/nothing-here", {
      headers: { "x-request-id": "log-missing" },
    });
    expect(missing.status).toBe(404);
    for (const [reqId, url, statusCode] of [
      ["log-read", "/v1/media/libraries?limit=1", 200],
      ["log-missing", "/v1/media/libraries/nothing-here", 404],
    ] as const) {
      const [line, ...others] = linesOf(reqId).filter((entry) => entry.msg === "request completed");
      expect(others).toEqual([]);
      expect(line).toMatchObject({ level: 30, req: { method: "GET", url }, res: { statusCode } });
      expect(line?.responseTime).toEqual(expect.any(Number));
    }
    expect(lines.filter((line) => line.msg === "incoming request")).toEqual([]);
  });

  it("names the organization and the key's id of an authenticated request, never the key", async () => {
    const auth = await t.cumulo.services.identity.authenticate(ADMIN_KEY);
    await t.request("GET", "/v1/media/libraries", { headers: { "x-request-id": "log-keyed" } });
    const keyed = linesOf("log-keyed").find((entry) => entry.msg === "request completed");
    expect(keyed?.req).toMatchObject({
      organization: auth?.organizationId,
      credential: `key:${auth?.keyId}`,
    });
    expect(JSON.stringify(keyed)).not.toContain(ADMIN_KEY);
    await t.request("GET", "/v1/media/libraries", {
      headers: { "x-request-id": "log-anonymous" },
      key: "not_a_key_of_anyone_0123456789",
    });
    const anonymous = linesOf("log-anonymous").find((entry) => entry.msg === "request completed");
    expect(anonymous?.res).toMatchObject({ statusCode: 401 });
    expect(anonymous?.req).not.toHaveProperty("organization");
  });
});

it("names the key whose budget a refused (429) request spent", async () => {
  const { logger, lines } = capturingLogger("info");
  const t = await startTestApp({ CUMULO_ROLES: "api", CUMULO_RATE_LIMIT: "2/1m" }, { logger });
  try {
    for (let i = 0; i < 3; i++) {
      await t.request("GET", "/v1/media/libraries", { headers: { "x-request-id": `log-budget-${i}` } });
    }
    const refused = lines.find((line) => line.reqId === "log-budget-2" && line.msg === "request completed");
    expect(refused?.res).toMatchObject({ statusCode: 429 });
    expect(refused?.req).toMatchObject({
      organization: expect.any(String),
      credential: expect.stringMatching(/^key:\d+$/),
    });
  } finally {
    await t.close();
  }
});
