import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { systemClock } from "../../src/clock.ts";
import { registerAuthDecorators } from "../../src/http/auth.ts";
import { registerResponseCache } from "../../src/http/response-cache.ts";
import type { AuthContext } from "../../src/identity/service.ts";

const callerFor = (organizationId: string, keyId: number): AuthContext => ({
  organizationId,
  userId: 1,
  userUuid: "00000000-0000-4000-8000-000000000001",
  keyId,
  kind: "organization",
  readOnly: false,
  restricted: false,
  billingAccountId: null,
});

/**
 * The mechanism on a bare Fastify app: routes count their runs, a header picks the caller, and the
 * test moves the store generation by hand. Exactness against a real store and the real routes is in
 * test/core/response-cache-app.test.ts.
 */
describe.each([
  { answerEarly: true, label: "sent before validation" },
  { answerEarly: false, label: "sent from the handler (developer mode)" },
])("response cache, kept answers $label", ({ answerEarly }) => {
  let app: FastifyInstance;
  let generation: number;
  const runs = { plain: 0, clock: 0, header: 0, status: 0, unmarked: 0 };
  /** Hooks run on /plain: a route-level one added before the cache (as the rate limit's), and later stages. */
  const hookRuns = { earlierPreParsing: 0, preValidation: 0, preHandler: 0, onSend: 0 };

  beforeEach(async () => {
    generation = 0;
    for (const name of Object.keys(runs)) runs[name as keyof typeof runs] = 0;
    for (const name of Object.keys(hookRuns)) hookRuns[name as keyof typeof hookRuns] = 0;
    app = Fastify();
    registerAuthDecorators(app);
    app.addHook("onRequest", async (request) => {
      const [organizationId = "org-a", keyId = "1"] = String(request.headers["x-caller"] ?? "").split(":");
      request.auth = callerFor(organizationId || "org-a", Number(keyId));
    });
    const onPlain = (count: keyof typeof hookRuns) => (request: { url: string }) => {
      if (request.url.startsWith("/plain")) hookRuns[count]++;
    };
    app.addHook("onRoute", (route) => {
      route.preParsing = [
        ...(route.preParsing ? [route.preParsing].flat() : []),
        async (request, _reply, payload) => {
          onPlain("earlierPreParsing")(request);
          return payload;
        },
      ];
    });
    app.addHook("preValidation", async (request) => onPlain("preValidation")(request));
    app.addHook("preHandler", async (request) => onPlain("preHandler")(request));
    app.addHook("onSend", async (request, _reply, payload) => {
      onPlain("onSend")(request);
      return payload;
    });
    registerResponseCache(app, { current: () => generation }, { answerEarly });
    const cached = { config: { storedDataOnly: true } };
    app.get("/plain", cached, async (request) => {
      runs.plain++;
      return { run: runs.plain, organization: request.auth.organizationId };
    });
    app.get("/clock", cached, async () => {
      runs.clock++;
      return { run: runs.clock, at: systemClock.now().toISOString() };
    });
    app.get("/header", cached, async (_request, reply) => {
      runs.header++;
      reply.header("etag", `"${runs.header}"`);
      return { run: runs.header };
    });
    app.get("/status", cached, async (_request, reply) => {
      runs.status++;
      return reply.code(202).send({ run: runs.status });
    });
    app.get("/unmarked", async () => {
      runs.unmarked++;
      return { run: runs.unmarked };
    });
    await app.ready();
  });
  afterEach(() => app.close());

  const get = (url: string, caller?: string) =>
    app.inject({ method: "GET", url, headers: caller ? { "x-caller": caller } : {} });

  it("answers again from the kept answer, byte for byte, while the generation holds", async () => {
    const first = await get("/plain?x=1");
    const second = await get("/plain?x=1");
    expect(runs.plain).toBe(1);
    expect(second.body).toBe(first.body);
    expect(second.statusCode).toBe(200);
    expect(second.headers["content-type"]).toBe(first.headers["content-type"]);
  });

  it("runs the hooks before its own and the answer's own on every kept answer, validation's and preHandler ones only when sent from the handler", async () => {
    for (let i = 0; i < 3; i++) expect((await get("/plain")).statusCode).toBe(200);
    expect(runs.plain).toBe(1);
    // Hooks added before the cache's (the rate limit) and the answer's own hooks run every time.
    expect(hookRuns.earlierPreParsing).toBe(3);
    expect(hookRuns.onSend).toBe(3);
    // Validation's hooks passed when the answer was made; developer mode's faults run as preHandler.
    const later = answerEarly ? 1 : 3;
    expect(hookRuns).toMatchObject({ preValidation: later, preHandler: later });
  });

  it("answers a GET in full after a HEAD of the same URL", async () => {
    const head = await app.inject({ method: "HEAD", url: "/plain" });
    expect(head.statusCode).toBe(200);
    expect(head.body).toBe("");
    expect((await get("/plain")).json()).toEqual({ run: runs.plain, organization: "org-a" });
  });

  it("runs the route again once the generation moves", async () => {
    await get("/plain");
    generation++;
    const after = await get("/plain");
    expect(runs.plain).toBe(2);
    expect(after.json()).toEqual({ run: 2, organization: "org-a" });
  });

  it("keeps answers apart by URL, organization and credential", async () => {
    await get("/plain?page=1", "org-a:1");
    await get("/plain?page=2", "org-a:1");
    await get("/plain?page=1", "org-a:2");
    const other = await get("/plain?page=1", "org-b:1");
    expect(runs.plain).toBe(4);
    expect(other.json()).toEqual({ run: 4, organization: "org-b" });
  });

  it("does not keep an answer made while the generation moved", async () => {
    const moving = Fastify();
    registerAuthDecorators(moving);
    moving.addHook("onRequest", async (request) => {
      request.auth = callerFor("org-a", 1);
    });
    let count = 0;
    registerResponseCache(moving, { current: () => count }, { answerEarly });
    let runsHere = 0;
    moving.get("/moving", { config: { storedDataOnly: true } }, async () => {
      runsHere++;
      count++; // a write of this process during the route
      return { run: runsHere };
    });
    await moving.ready();
    await moving.inject({ method: "GET", url: "/moving" });
    await moving.inject({ method: "GET", url: "/moving" });
    await moving.close();
    expect(runsHere).toBe(2);
  });

  it("does not keep answers that read the clock, set headers of their own or are not 200", async () => {
    for (let i = 0; i < 2; i++) {
      await get("/clock");
      await get("/header");
      await get("/status");
    }
    expect(runs).toMatchObject({ clock: 2, header: 2, status: 2 });
    expect((await get("/header")).headers.etag).toBe('"3"');
  });

  it("leaves routes that are not marked alone", async () => {
    await get("/unmarked");
    await get("/unmarked");
    expect(runs.unmarked).toBe(2);
  });
});
