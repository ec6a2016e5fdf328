import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { type OpenApiNode, resolveIn } from "../support/openapi.ts";

type Node = OpenApiNode;

/** Operations whose 503 is an answer of their own (the livestream is unhealthy), not the store's. */
const OWN_503 = new Set(["getLivestreamHealth"]);

// A generated client is told only of the answers the document declares: the 503 any route gives while
// the store is away, and the headers saying when to try again, were missing (QA of 4 December, session 41).
describe("the error answers in the OpenAPI document", () => {
  let t: TestApp;
  let document: Node;
  beforeAll(async () => {
    t = await startTestApp();
    document = (await t.request("GET", "/openapi.json", { anonymous: true })).body as Node;
  });
  afterAll(() => t.close());

  const resolve = (value: unknown): Node => resolveIn(document)(value);
  const operations = () =>
    Object.values(document.paths as Node).flatMap((item) =>
      Object.values(item as Node).map((operation) => operation as Node),
    );

  it("declare 503 with Retry-After wherever 500 is, and a 429's rate-limit headers", () => {
    const missing: string[] = [];
    for (const operation of operations()) {
      const responses = operation.responses as Node;
      if (!responses["500"]) continue;
      const unavailable = responses["503"] ? resolve(responses["503"]) : undefined;
      const retryAfter = (unavailable?.headers as Node | undefined)?.["retry-after"];
      if (!retryAfter && !OWN_503.has(operation.operationId as string))
        missing.push(`${operation.operationId} 503`);
      const limited = responses["429"] ? (resolve(responses["429"]).headers as Node | undefined) : undefined;
      for (const name of ["retry-after", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]) {
        if (!limited?.[name]) missing.push(`${operation.operationId} 429 ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it("declare the listener's own answers wherever 500 is: a request too slow, a URL or headers too long", () => {
    const missing = operations()
      .filter((operation) => (operation.responses as Node)["500"])
      .flatMap((operation) =>
        ["408", "414", "431"]
          .filter((status) => !(operation.responses as Node)[status])
          .map((status) => `${operation.operationId} ${status}`),
      );
    expect(missing).toEqual([]);
  });

  it("declare the Location of a resumable upload's creation", () => {
    const creation = operations().find((operation) => operation.operationId === "createResumableUpload");
    const created = resolve((creation?.responses as Node | undefined)?.["201"]);
    expect(Object.keys(created.headers as Node)).toContain("location");
  });
});
