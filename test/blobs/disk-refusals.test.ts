import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OffsetClock } from "../../src/clock.ts";
import { capturingLogger } from "../fuzz/log-capture.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";
import { videoPath } from "../video/support.ts";
import { removalJobs } from "./support.ts";

const setImmutable = (path: string, on: boolean) =>
  execFileSync("chattr", [on ? "+i" : "-i", path], { stdio: "ignore" });

/**
 * Whether an immutable file (`chattr +i`) refuses its removal here, even to root, which file modes
 * do not stop: ext4 does; without `chattr`, its capability or a file system that takes it, no.
 */
function immutableFilesRefuseRemoval(): boolean {
  const dir = mkdtempSync(join(tmpdir(), "cumulo-chattr-"));
  const probe = join(dir, "probe");
  writeFileSync(probe, "");
  try {
    setImmutable(probe, true);
    try {
      unlinkSync(probe);
      return false;
    } catch {
      setImmutable(probe, false);
      return true;
    }
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// 1x1 PNG
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);

/**
 * A local disk that refuses a removal (EPERM: a file made immutable) refuses it until the operator
 * acts. As on a bucket that refuses deletes, its removal jobs spend their attempts and fail as
 * refused, logged as an error, and the failed job keeps what was not removed. They failed as an
 * `ENOTDIR` naming a path, which is what Node's `rm` reports for it.
 */
describe.skipIf(!immutableFilesRefuseRemoval())(
  "removals the local disk refuses",
  { timeout: 60_000 },
  () => {
    let app: TestApp;
    const clock = new OffsetClock();
    const log = capturingLogger("warn");
    const immutable: string[] = [];

    beforeAll(async () => {
      app = await startTestApp({ CUMULO_ROLES: "api,worker" }, { clock, logger: log.logger });
    }, 60_000);

    afterAll(async () => {
      // Undone first, or the test's data dir could not be removed.
      for (const path of immutable) setImmutable(path, false);
      await app?.close();
    });

    it("fail after their attempts, logged as an error", async () => {
      const libraryId = (await createLibrary(app, { name: "refusing disk" })).id;
      const videoId = (await createVideo(app, libraryId)).id;
      const path = videoPath(libraryId, videoId);
      const thumbnail = new FormData();
      thumbnail.set("file", new Blob([PNG]), "poster.png");
      expect((await app.request("POST", `${path}/thumbnails`, { body: thumbnail })).status).toBe(200);
      const subtitle = new FormData();
      subtitle.set("file", new Blob(["WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nhello\n"]), "en.vtt");
      subtitle.set("title", "English");
      subtitle.set("language", "en");
      const added = await app.request("POST", `${path}/subtitles`, { body: subtitle });
      expect(added.status, added.text).toBe(201);

      const folder = join(app.config.dataDir, "blobs", "media", libraryId, videoId);
      const files = () =>
        readdirSync(folder, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile());
      for (const file of files()) {
        const filePath = join(file.parentPath, file.name);
        setImmutable(filePath, true);
        immutable.push(filePath);
      }
      expect(immutable).toHaveLength(2);

      // One removal by key (the subtitle's file), one by prefix (the video's folder).
      expect((await app.request("DELETE", `${path}/subtitles/${added.body.data.id}`)).status).toBe(200);
      expect((await app.request("DELETE", path)).status).toBe(200);
      // Time moved on whenever no removal runs, and the worker woken: its retries run at once.
      const failed = await waitUntil(
        async () => {
          const jobs = await removalJobs(app);
          if (jobs.length === 2 && jobs.every((job) => job.status === "failed")) return jobs;
          if (!jobs.some((job) => job.status === "running")) {
            clock.offsetMs += 10_000;
            app.cumulo.services.jobs.notify();
          }
          return undefined;
        },
        20_000,
        "the refused removals failed",
      );
      for (const job of failed) {
        expect(job.attempts).toBe(5);
        expect(job.last_error).toBe("media storage refused the request: EPERM");
      }
      const gaveUp = log.lines.filter(
        (line) => line.msg === "removal job failed: the files its payload names stay in media storage",
      );
      expect(gaveUp.map((line) => line.level)).toEqual([50, 50]);
      expect(files()).toHaveLength(2);
    });
  },
);

const LOCAL_STORE = fileURLToPath(new URL("../../src/blobs/local.ts", import.meta.url));

/**
 * Files in a folder the node may not write to (blobs left by a command run as another user): unlink
 * fails with EACCES, which the removal job took for an outage and retried for ever. Root writes
 * anywhere, so the removals run in a process of the unprivileged `nobody` (uid 65534).
 */
describe.skipIf(process.getuid?.() !== 0)("removals file modes refuse", { timeout: 60_000 }, () => {
  it("are refusals of the store, not an outage", () => {
    const dataDir = mkdtempSync(join(tmpdir(), "cumulo-eacces-"));
    try {
      // Others may read the folders, not write them.
      chmodSync(dataDir, 0o755);
      mkdirSync(join(dataDir, "blobs", "media", "lib", "video"), { recursive: true });
      writeFileSync(join(dataDir, "blobs", "media", "lib", "video", "file"), "x");
      writeFileSync(join(dataDir, "blobs", "media", "lib", "file"), "x");
      const script = `
        import { LocalBlobStore } from ${JSON.stringify(LOCAL_STORE)};
        const store = new LocalBlobStore(process.argv[1], { longestUploadMs: 60000 });
        const failed = (error) => \`\${error.name}: \${error.message}\`;
        const byKey = await store.delete("media/lib/file").catch(failed);
        const byPrefix = await store.deletePrefix("media/lib/video").catch(failed);
        process.stdout.write(JSON.stringify([byKey, byPrefix]));`;
      const child = spawnSync(
        process.execPath,
        ["--import", "tsx", "--input-type=module", "-e", script, dataDir],
        {
          uid: 65534,
          gid: 65534,
          encoding: "utf8",
        },
      );
      expect(child.stderr).toBe("");
      expect(JSON.parse(child.stdout)).toEqual([
        "BlobStoreRefusedError: media storage refused the request: EACCES",
        "BlobStoreRefusedError: media storage refused the request: EACCES",
      ]);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
