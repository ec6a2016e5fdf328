import { type Stats, statSync } from "node:fs";
import type SqliteDatabase from "better-sqlite3";

/** How often a running process looks at its store file's path. */
const CHECK_INTERVAL_MS = 1000;

/**
 * Watches that the SQLite file a process opened is still the one at its path. A data dir emptied
 * and restored into while a server runs (QA of 6 December) left the server writing to its deleted
 * file: every write was answered 201 and lost at the next start. Once the path names another file,
 * or none, the connection takes no more writes (`query_only`: they fail with SQLITE_READONLY, which
 * is answered 503), reads go on from the open file, and `/readyz` says why.
 */
export class SqliteFileGuard {
  readonly #opened: Stats;
  readonly #timer: NodeJS.Timeout;
  #replaced = false;

  constructor(
    private readonly path: string,
    private readonly file: SqliteDatabase.Database,
    private readonly onReplaced: (path: string) => void,
  ) {
    this.#opened = statSync(path);
    this.#timer = setInterval(() => this.replaced(), CHECK_INTERVAL_MS).unref();
  }

  /** Whether the file at the path is no longer the one this process opened (checked now). */
  replaced(): boolean {
    if (this.#replaced) return true;
    let now: Stats | undefined;
    try {
      now = statSync(this.path, { throwIfNoEntry: false });
    } catch {
      // Not readable now (a folder's mode changed): nothing says the file was replaced.
      return false;
    }
    if (now && now.ino === this.#opened.ino && now.dev === this.#opened.dev) return false;
    this.#replaced = true;
    this.file.pragma("query_only = ON");
    this.onReplaced(this.path);
    return true;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
