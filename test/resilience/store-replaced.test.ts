import { copyFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { startTestApp } from "../support/app.ts";
import { testStoreKind } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";

/*
 * An operator empties a running server's data dir and restores a backup into it (QA of 6 December):
 * the server went on writing to its deleted file, answering 201 for writes that the next start lost.
 */
describe.runIf(testStoreKind() === "sqlite")("a SQLite store file replaced under a running server", () => {
  for (const [how, replace] of [
    [
      "replaced by another file (a restore)",
      (path: string) => {
        copyFileSync(path, `${path}.restored`);
        renameSync(`${path}.restored`, path);
      },
    ],
    ["removed", (path: string) => rmSync(path)],
  ] as const) {
    it(`refuses writes with 503 and is not ready once the file is ${how}; reads go on`, async () => {
      const t = await startTestApp();
      try {
        const before = await t.request("POST", "/v1/media/libraries", { json: { name: "Before" } });
        expect(before.status).toBe(201);
        replace(join(t.store.dataDir, "cumulo.sqlite"));

        const ready = await waitUntil(
          async () => {
            const answer = await fetch(`${t.baseUrl}/readyz`);
            return answer.status === 503 ? answer.json() : undefined;
          },
          10_000,
          "/readyz to see the file replaced",
        );
        expect(ready).toMatchObject({ status: "store_replaced", reason: expect.stringContaining("restart") });
        // Before: 201, and the library was gone at the next start.
        const after = await t.request("POST", "/v1/media/libraries", { json: { name: "After" } });
        expect(after.status).toBe(503);
        expect(after.headers.get("retry-after")).toBe("5");
        const list = await t.request("GET", "/v1/media/libraries");
        expect(list.status).toBe(200);
        expect(list.body.data.map((library: { name: string }) => library.name)).toEqual(["Before"]);
      } finally {
        await t.close();
      }
    });
  }
});
