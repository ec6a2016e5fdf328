import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { WEBHOOK_CONCURRENCY } from "../../src/services.ts";
import { openFilesLimit, slowAttemptSlots, slowSlotsCut } from "../../src/webhooks/connection-budget.ts";
import { serve, stopAll } from "../support/process.ts";
import { createMigratedTestStore } from "../support/store.ts";

const limits = (
  openFiles: string,
) => `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            ${openFiles}                65536                files
Max locked memory         8388608              8388608              bytes
`;

describe("webhook connections within the process's open files", () => {
  it("reads the soft open-file limit, and nothing when it is unlimited or unreadable", () => {
    expect(openFilesLimit(limits("1024"))).toBe(1024);
    expect(openFilesLimit(limits("unlimited"))).toBeUndefined();
    expect(openFilesLimit("")).toBeUndefined();
  });

  it("reads this process's own limit on Linux", () => {
    if (process.platform !== "linux") return;
    expect(openFilesLimit()).toBeGreaterThan(0);
  });

  // QA of session 54: at a limit of 1,024, 1,024 attempts left the store no file to open.
  it("gives slow attempts three times the others' slots, within half the open files for all", () => {
    expect(slowAttemptSlots(256, 65536)).toBe(768);
    expect(slowAttemptSlots(256, undefined)).toBe(768);
    expect(slowAttemptSlots(256, 2048)).toBe(768);
    expect(slowAttemptSlots(256, 1024)).toBe(256);
    expect(slowAttemptSlots(256, 512)).toBe(0);
    expect(slowAttemptSlots(256, 100)).toBe(0);
  });

  it("says nothing of a limit that allows every slot, and what a lower one costs", () => {
    expect(slowSlotsCut(256, 2048)).toBeUndefined();
    expect(slowSlotsCut(256, undefined)).toBeUndefined();
    const cut = slowSlotsCut(256, 1024);
    expect(cut).toContain("the open-file limit (1024) leaves 256 of 768 slots");
    expect(cut).toContain("past about 512 endpoints holding requests open");
    expect(cut).toContain("raise the limit to 2048 or more");
  });

  // The cut was found only by its effect (QA of session 54): a worker says it at its start.
  it.skipIf(!existsSync("/usr/bin/prlimit"))(
    "warns at a worker's start when its open-file limit cuts the slow slots, and only then",
    { timeout: 180_000 },
    async () => {
      const store = await createMigratedTestStore();
      const start = (roles: string, openFiles: number) =>
        serve(
          {
            CUMULO_DATA_DIR: store.dataDir,
            DATABASE_URL: store.databaseUrl,
            CUMULO_ROLES: roles,
            CUMULO_LOG_LEVEL: "info",
          },
          ["serve"],
          90_000,
          ["/usr/bin/prlimit", `--nofile=${openFiles}:${openFiles}`],
        );
      const warnings = (output: string) =>
        output
          .split("\n")
          .filter((line) => line.startsWith("{"))
          .map((line) => JSON.parse(line) as { level: number; msg: string })
          .filter((line) => line.level === 40 && line.msg.startsWith("webhook delivery:"));
      try {
        for (const [roles, openFiles, warned] of [
          ["worker", 1024, true],
          ["worker", 4096, false],
          ["api", 1024, false],
        ] as const) {
          const node = await start(roles, openFiles);
          await stopAll([node]);
          expect(warnings(node.output()).map((line) => line.msg)).toEqual(
            warned ? [slowSlotsCut(WEBHOOK_CONCURRENCY, 1024)] : [],
          );
        }
      } finally {
        await store.drop();
      }
    },
  );
});
