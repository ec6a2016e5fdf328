import { constants, existsSync, lstatSync, mkdirSync, statSync } from "node:fs";
import { access, statfs } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { isStorageFault } from "./blobs/store.ts";

/**
 * `mkdirSync(path, { recursive: true })`, making the missing parents one at a time. Node's recursive
 * form never returns when a parent cannot be made and reads as missing on every try (a path under
 * /proc), so a mistyped CUMULO_DATA_DIR hung start-up instead of naming the path. Answers, as that
 * form does, the first directory it made (undefined when it made none), for a caller that must take
 * back what it made.
 */
export function makeDirectories(path: string): string | undefined {
  const missing: string[] = [];
  // The file system's root always exists, so the walk up ends there at the latest.
  for (let current = resolve(path); !existsSync(current); current = dirname(current))
    missing.unshift(current);
  // Already there: a file of that name is refused in words (mkdir's own is "EEXIST: file already exists").
  if (missing.length === 0 && !statSync(path).isDirectory()) throw new Error(`${path} is not a directory`);
  let first: string | undefined;
  for (const directory of missing) {
    try {
      mkdirSync(directory);
      first ??= directory;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      // Another process made it first, or something else stands there: a link to nothing, under
      // which the next mkdir would say only ENOENT.
      if (!statSync(directory, { throwIfNoEntry: false })?.isDirectory()) {
        const what = lstatSync(directory).isSymbolicLink() ? "a link to nothing" : "not a directory";
        throw new Error(`${directory} is ${what}`);
      }
    }
  }
  return first;
}

/** The permission bits of the owner's group and of every other account. */
const GROUP_AND_OTHERS = 0o077;

/**
 * From now on, what this process and its children (ffmpeg) create is its user's alone: directories
 * 0700, files 0600 (CUMULO_DATA_DIR_MODE=private). A umask rather than a mode at each creation:
 * children inherit it, and no place that makes a file (SQLite's -wal and -shm, a copy, a stream)
 * can forget it. Bits the operator's own umask already takes away stay taken away.
 */
export function createPrivately(): void {
  process.umask(process.umask(GROUP_AND_OTHERS) | GROUP_AND_OTHERS);
}

/** Whether accounts other than the owner and its group may enter or read `path` (its mode gives them any bit). */
export const openToOthers = (path: string): boolean => (statSync(path).mode & 0o007) !== 0;

/**
 * Less free space than this is a full disk: a write that failed for want of room leaves less than
 * a block behind, and no healthy disk (a scratch disk, the store's) runs this close to full.
 */
const FULL_BELOW_BYTES = 1024 * 1024;

/** Whether the disk under `directory` can take no more: (nearly) no space or inodes left, or read-only. */
export async function diskCannotWrite(directory: string): Promise<boolean> {
  try {
    const disk = await statfs(directory);
    // File systems that allot inodes on demand (btrfs) report none at all.
    if (disk.bavail * disk.bsize < FULL_BELOW_BYTES || (disk.files > 0 && disk.ffree === 0)) return true;
    await access(directory, constants.W_OK);
    return false;
  } catch (error) {
    return isStorageFault(error);
  }
}
