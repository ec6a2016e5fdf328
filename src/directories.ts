import { existsSync, mkdirSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";

/**
 * `mkdirSync(path, { recursive: true })`, making the missing parents one at a time. Node's recursive
 * form never returns when a parent cannot be made and reads as missing on every try (a path under
 * /proc), so a mistyped CUMULO_DATA_DIR hung start-up instead of naming the path.
 */
export function makeDirectories(path: string): void {
  const missing: string[] = [];
  // The file system's root always exists, so the walk up ends there at the latest.
  for (let current = resolve(path); !existsSync(current); current = dirname(current))
    missing.unshift(current);
  // Already there: a file of that name is refused in words (mkdir's own is "EEXIST: file already exists").
  if (missing.length === 0 && !statSync(path).isDirectory()) throw new Error(`${path} is not a directory`);
  for (const directory of missing) {
    try {
      mkdirSync(directory);
    } catch (error) {
      // Another process made it first.
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  }
}
