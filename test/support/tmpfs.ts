import { spawnSync } from "node:child_process";

/** Why a case that fills a disk is skipped without `mountTmpfs`. */
export const NO_TMPFS =
  "mounting a small tmpfs, the only way found to fill a disk, needs root with CAP_SYS_ADMIN";

/** Mounts a tmpfs of `size` (mount's `size=`: "64k", "4m") at `dir`; false when this process may not (not root). */
export const mountTmpfs = (dir: string, size: string): boolean =>
  spawnSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir]).status === 0;

export function unmountTmpfs(dir: string): void {
  spawnSync("umount", [dir]);
}
