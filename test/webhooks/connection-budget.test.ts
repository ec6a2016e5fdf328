import { describe, expect, it } from "vitest";
import { openFilesLimit, slowAttemptSlots } from "../../src/webhooks/connection-budget.ts";

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
});
