import { chmodSync, lstatSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli.ts";
import { entriesUnder } from "../support/files.ts";
import { generateClip } from "../support/media.ts";
import { exitOf, type Served, serve } from "../support/process.ts";
import { createTestStore, type TestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";

const KEY = "data_dir_mode_key_0123456789abcdef";

/** `path` and everything under it as "relative-path mode" lines, octal permission bits; files gone meanwhile left out. */
function modesUnder(path: string): string[] {
  // A transcode still running once the video is ready removes its work dirs meanwhile.
  const names = ["", ...entriesUnder(path).map((entry) => entry.path)];
  return names.flatMap((name) => {
    try {
      return [`${name || "."} ${(lstatSync(join(path, name)).mode & 0o777).toString(8)}`];
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw error;
    }
  });
}

/**
 * The lines of `modesUnder` whose mode is not `directory`'s (directories) or `file`'s (the rest); a
 * file gone meanwhile (a transcode's work dir being removed) is left out.
 */
function modesOtherThan(path: string, directory: string, file: string): string[] {
  return modesUnder(path).filter((line) => {
    const [name, mode] = line.split(" ");
    try {
      return mode !== (lstatSync(join(path, name ?? "")).isDirectory() ? directory : file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw error;
    }
  });
}

describe("the modes of what cumulo creates under the data dir (CUMULO_DATA_DIR_MODE)", () => {
  let store: TestStore;
  let clip: string;
  let umask: number;
  const running: Served[] = [];

  const start = async (env: Record<string, string>) => {
    const node = await serve({ DATABASE_URL: store.databaseUrl, CUMULO_BOOTSTRAP_API_KEY: KEY, ...env });
    running.push(node);
    return node;
  };
  const stop = async (node: Served) => {
    node.child.kill("SIGTERM");
    expect(await exitOf(node.child)).toBe(0);
  };
  /** Creates a library and a video and uploads the clip as its source; answers the video's path. */
  const upload = async (node: Served) => {
    const call = async (
      method: string,
      path: string,
      body: string | Uint8Array,
      type = "application/json",
    ) => {
      const response = await fetch(`${node.apiUrl}${path}`, {
        method,
        body,
        headers: { authorization: `Bearer ${KEY}`, "content-type": type },
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    const library = await call("POST", "/v1/media/libraries", JSON.stringify({ name: "Modes" }));
    const libraryId = library.body.data.id;
    const video = await call(
      "POST",
      `/v1/media/libraries/${libraryId}/videos`,
      JSON.stringify({ title: "v" }),
    );
    const path = `/v1/media/libraries/${libraryId}/videos/${video.body.data.id}`;
    expect((await call("PUT", `${path}/source`, readFileSync(clip), "video/mp4")).status).toBe(202);
    return path;
  };

  beforeAll(async () => {
    store = await createTestStore();
    // The servers this file starts inherit it: the modes `inherit` leaves are this umask's.
    umask = process.umask(0o022);
    clip = await generateClip(store.dataDir, { seconds: 1, width: 160, height: 90 });
  });
  afterAll(async () => {
    for (const node of running) node.child.kill("SIGKILL");
    process.umask(umask);
    await store?.drop();
  });

  it("makes a new data dir, its store, blobs, ffmpeg's outputs and a backup its user's alone", async () => {
    const dataDir = join(store.dataDir, "fresh");
    const node = await start({ CUMULO_DATA_DIR: dataDir });
    const path = await upload(node);
    await waitUntil(
      async () => {
        const response = await fetch(`${node.apiUrl}${path}`, {
          headers: { authorization: `Bearer ${KEY}` },
        });
        const { status } = ((await response.json()) as any).data;
        if (status === "failed") throw new Error("processing failed");
        return status === "ready";
      },
      90_000,
      "the video ready",
    );
    const modes = modesUnder(dataDir);
    // The renditions ffmpeg wrote, and SQLite's files while the server holds them open.
    expect(modes.some((line) => /^blobs\/.*\.m3u8 /.test(line))).toBe(true);
    if (store.kind === "sqlite") {
      expect(modes).toEqual(
        expect.arrayContaining(["cumulo.sqlite 600", "cumulo.sqlite-wal 600", "cumulo.sqlite-shm 600"]),
      );
    }
    expect(modesOtherThan(dataDir, "700", "600")).toEqual([]);
    expect(node.output()).not.toMatch(/warning/);
    await stop(node);

    if (store.kind === "sqlite") {
      const backup = join(store.dataDir, "backup");
      const backedUp = await runCli(["backup", "--to", backup], { CUMULO_DATA_DIR: dataDir });
      expect(backedUp.code, backedUp.stderr).toBe(0);
      expect(modesUnder(backup)).toEqual(expect.arrayContaining(["cumulo.sqlite 600", "manifest.json 600"]));
      expect(modesOtherThan(backup, "700", "600")).toEqual([]);
    }
  }, 240_000);

  it("warns of an operator's data dir other accounts can read, and leaves its mode as it is", async () => {
    const dataDir = join(store.dataDir, "operators");
    mkdirSync(dataDir);
    chmodSync(dataDir, 0o755);
    const node = await start({ CUMULO_DATA_DIR: dataDir, CUMULO_ROLES: "api" });
    expect(node.output()).toContain(
      `cumulo: warning: the data dir ${dataDir} can be read by other accounts of this host, and with it the store and private videos: chmod 700 ${dataDir} (or set CUMULO_DATA_DIR_MODE=inherit if it is shared on purpose)\n`,
    );
    await upload(node);
    // What Cumulo makes in it is private all the same.
    expect(modesOtherThan(dataDir, "700", "600")).toEqual([". 755"]);
    await stop(node);
  }, 120_000);

  it("leaves the modes to the umask with CUMULO_DATA_DIR_MODE=inherit, and does not warn", async () => {
    const dataDir = join(store.dataDir, "shared");
    const node = await start({
      CUMULO_DATA_DIR: dataDir,
      CUMULO_DATA_DIR_MODE: "inherit",
      CUMULO_ROLES: "api",
    });
    await upload(node);
    const modes = modesUnder(dataDir);
    expect(modes.some((line) => line.startsWith("blobs/"))).toBe(true);
    if (store.kind === "sqlite") expect(modes).toContain("cumulo.sqlite 644");
    // The secret key file is 0600 whatever the umask.
    expect(modesOtherThan(dataDir, "755", "644").filter((line) => line !== "cloud-secret.key 600")).toEqual(
      [],
    );
    // (An API-only node on PostgreSQL is warned of its local media files, which is another matter.)
    expect(node.output()).not.toMatch(/warning: the data dir/);
    await stop(node);
  }, 120_000);
});
