import { type Dirent, readdirSync } from "node:fs";
import { join } from "node:path";

export interface EntryUnder {
  /** Relative to the directory walked, with the platform's separator. */
  path: string;
  isFile: boolean;
}

/**
 * Everything under `dir`, a directory before what it holds, read one directory at a time: one removed
 * while it is being read (a transcode's work dir, a deleted video's files, s3rver's folders) counts
 * as empty, where `readdirSync`'s `recursive` throws ENOENT. `dir` itself missing is empty too.
 */
export function entriesUnder(dir: string, prefix = ""): EntryUnder[] {
  let entries: Dirent[];
  try {
    entries = readdirSync(join(dir, prefix), { withFileTypes: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
  return entries.flatMap((entry) => {
    const path = join(prefix, entry.name);
    const here = { path, isFile: entry.isFile() };
    return entry.isDirectory() ? [here, ...entriesUnder(dir, path)] : [here];
  });
}
