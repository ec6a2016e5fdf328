import { readdir, readFile, readlink, realpath } from "node:fs/promises";
import type { FastifyBaseLogger } from "fastify";

/** The parent's pid, from `/proc/<pid>/stat` (the command name in parentheses may hold spaces). */
function parentOf(stat: string): number {
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
}

/**
 * Ends ffmpeg and ffprobe runs a killed worker left behind: processes whose arguments name a file
 * under `workRoot` and whose parent no longer runs this Node.js binary (they were handed to init or
 * a subreaper when the worker died with SIGKILL, which gives it no chance to end them). A live
 * worker's runs, on the same data dir or not, have that worker as their parent and are left alone.
 * The parent is told by its executable, not its name, which `process.title` changes. Linux only
 * (`/proc`); elsewhere nothing is done. Answers how many were ended.
 */
export async function stopOrphanedTools(workRoot: string, logger: FastifyBaseLogger): Promise<number> {
  const names = await readdir("/proc").catch(() => [] as string[]);
  const node = await realpath(process.execPath);
  let stopped = 0;
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    try {
      const args = (await readFile(`/proc/${pid}/cmdline`, "utf8")).split("\0");
      const tool = (args[0] ?? "").split("/").pop();
      if (tool !== "ffmpeg" && tool !== "ffprobe") continue;
      if (!args.some((arg) => arg.startsWith(`${workRoot}/`))) continue;
      const parent = parentOf(await readFile(`/proc/${pid}/stat`, "utf8"));
      const parentBinary = await readlink(`/proc/${parent}/exe`).catch(() => undefined);
      if (parentBinary === node) continue;
      process.kill(pid, "SIGKILL");
      stopped++;
    } catch {
      // The process ended meanwhile, or is not ours to read.
    }
  }
  if (stopped > 0) logger.warn({ stopped }, "ended media tool runs a killed worker left behind");
  return stopped;
}
