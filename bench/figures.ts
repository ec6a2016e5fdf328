import { readFileSync } from "node:fs";

/** Linux's USER_HZ, the unit of /proc times. */
const CLOCK_TICKS_PER_SECOND = 100;

/**
 * User + system CPU time (µs) in a Linux /proc `stat` file, a process's (`/proc/<pid>/stat`) or a
 * thread's (`/proc/self/task/<tid>/stat`); undefined when it cannot be read (not Linux, or ended).
 */
export function statCpuMicros(path: string): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
  // utime and stime, in clock ticks, are the 14th and 15th fields; the name (2nd) may hold spaces.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / CLOCK_TICKS_PER_SECOND;
}

/**
 * CPU time (µs) process `pid` used so far, with its live children's when `withChildren` (nginx's
 * workers, say); NaN where /proc cannot tell.
 */
export function processCpuMicros(pid: number, withChildren = false): number {
  const own = statCpuMicros(`/proc/${pid}/stat`) ?? Number.NaN;
  if (!withChildren) return own;
  let children: string[];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").split(" ").filter(Boolean);
  } catch {
    return own;
  }
  return children.reduce((total, child) => total + processCpuMicros(Number(child), true), own);
}

/** CPU time (µs) of each process so far, by pid; a process that has ended (or no /proc) is left out. */
export function cpuByProcess(pids: number[]): Map<number, number> {
  const used = new Map<number, number>();
  for (const pid of pids) {
    const micros = statCpuMicros(`/proc/${pid}/stat`);
    if (micros !== undefined) used.set(pid, micros);
  }
  return used;
}

/** The middle value of `values` (the upper one of the two middle ones for an even count); NaN for none. */
export const median = (values: number[]): number =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
