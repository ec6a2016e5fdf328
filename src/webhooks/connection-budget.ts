import { readFileSync } from "node:fs";

/** The process's open-file limit from Linux's /proc/self/limits text; undefined when unlimited or unknown. */
export function openFilesLimit(limitsText: string | undefined = readProcessLimits()): number | undefined {
  const line = limitsText?.split("\n").find((row) => row.startsWith("Max open files"));
  const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
  return soft !== undefined && /^\d+$/.test(soft) ? Number(soft) : undefined;
}

function readProcessLimits(): string | undefined {
  try {
    return readFileSync("/proc/self/limits", "utf8");
  } catch {
    return undefined;
  }
}

/**
 * Slots for attempts that turned slow, beyond the `concurrency` of the others: three times as many,
 * within half the process's open files for every attempt all told (each holds a connection; the
 * store, the API and the edge need the rest). QA of session 54: at a limit of 1,024, 1,024 attempts
 * left none for the store, and the API answered 500.
 */
export function slowAttemptSlots(concurrency: number, openFiles: number | undefined): number {
  const most = 3 * concurrency;
  if (openFiles === undefined) return most;
  return Math.max(0, Math.min(most, Math.floor(openFiles / 2) - concurrency));
}
