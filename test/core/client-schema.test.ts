import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderSchema, SCHEMA_FILE } from "../../packages/client/scripts/generate.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

describe("the typed client (packages/client)", () => {
  let app: TestApp;

  beforeAll(async () => {
    // Developer mode on: the client types its `/_cumulo` routes too.
    app = await startTestApp({ CUMULO_DEV_MODE: "true" });
  });
  afterAll(async () => {
    await app?.close();
  });

  it("has committed types that match the server's current OpenAPI document", async () => {
    const document = (await app.request("GET", "/openapi.json", { anonymous: true })).body;
    const expected = await renderSchema(document);
    // Compared as a boolean so a stale file fails with the fix, not a megabyte of diff.
    const fresh = readFileSync(SCHEMA_FILE, "utf8") === expected;
    expect(fresh, "packages/client/src/schema.d.ts is stale: run `npm run client:generate`").toBe(true);
    expect(expected).toContain('"/_cumulo/state/reset": {');
    // A reset takes no body; moving the clock needs one of its fields, and its body stays required.
    expect(document.paths["/_cumulo/state/reset"].post.requestBody.required).toBe(false);
    expect(document.paths["/_cumulo/time"].post.requestBody.required).toBe(true);
    // Rotating a webhook secret takes an optional overlap; without a body it behaves as before.
    const rotate = document.paths["/v1/media/libraries/{libraryId}/webhooks/{endpointId}/rotate-secret"];
    expect(rotate.post.requestBody.required).toBe(false);
    // Rendering the whole document is a few seconds of CPU, several times that beside other files.
  }, 90_000);
});
