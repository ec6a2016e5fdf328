import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { capturingLogger } from "../fuzz/log-capture.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

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
});
