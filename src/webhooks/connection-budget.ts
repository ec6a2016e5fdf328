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

/** Slots for slow attempts per slot of the others, when the open-file limit allows. */
const SLOW_SLOTS_PER_SLOT = 3;

/**
 * Slots for attempts that turned slow, beyond the `concurrency` of the others: three times as many,
 * within half the process's open files for every attempt all told (each holds a connection; the
 * store, the API and the edge need the rest). QA of session 54: at a limit of 1,024, 1,024 attempts
 * left none for the store, and the API answered 500.
 */
export function slowAttemptSlots(concurrency: number, openFiles: number | undefined): number {
  const most = SLOW_SLOTS_PER_SLOT * concurrency;
  if (openFiles === undefined) return most;
  return Math.max(0, Math.min(most, Math.floor(openFiles / 2) - concurrency));
}

/**
 * What an open-file limit too low for every slow slot costs, for a worker to say at its start (the
 * cut was otherwise found only by its effect: fast endpoints waiting behind hanging ones). Undefined
 * when the limit allows every slot.
 */
export function slowSlotsCut(concurrency: number, openFiles: number | undefined): string | undefined {
  const slots = slowAttemptSlots(concurrency, openFiles);
  const wanted = SLOW_SLOTS_PER_SLOT * concurrency;
  if (slots >= wanted) return undefined;
  // Past the slow slots, attempts turning slow stay in the others' slots until those are full too.
  return (
    `webhook delivery: the open-file limit (${openFiles}) leaves ${slots} of ${wanted} slots for slow ` +
    `endpoints' attempts: past about ${slots + concurrency} endpoints holding requests open, fast ` +
    `endpoints wait for those requests' timeouts; raise the limit to ${2 * (concurrency + wanted)} or more ` +
    "(ulimit -n, systemd's LimitNOFILE; docs/operations.md)"
  );
}
