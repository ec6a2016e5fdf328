import { spawnSync } from "node:child_process";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import SqliteDatabase from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { backup } from "../../src/ops/backup.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { BIN, runCli } from "../support/cli.ts";
import { startTestS3 } from "../support/s3.ts";
import { type TestStore, testStoreKind } from "../support/store.ts";

/** Every file under `dir` (relative paths), uploads in progress left out. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .filter((path) => !path.startsWith(".tmp"))
    .sort();
}

// `cumulo backup` covers SQLite only; PostgreSQL is backed up with pg_dump (docs/operations.md).
describe.skipIf(testStoreKind() === "postgres")(
  "cumulo backup and restore (SQLite)",
  { timeout: 90_000 },
  () => {
    let t: TestApp;
    const scratch: string[] = [];
    const tempDir = () => {
      const dir = mkdtempSync(join(tmpdir(), "cumulo-backup-"));
      scratch.push(dir);
      return dir;
    };

    beforeAll(async () => {
      // API only: no worker processes the uploaded bytes, so the blob stays as it was acknowledged.
      // The writer runs as fast as it can: the request budget must not be what stops it.
      t = await startTestApp({ CUMULO_ROLES: "api", CUMULO_RATE_LIMIT: "1000000/1s" });
    });
    afterAll(async () => {
      await t.close();
      for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
    });

    it("takes a consistent backup under writes and restores it into a new data dir", async () => {
      const storage = await t.cloud("GET", "/v1/storage/user");
      expect(storage.status).toBe(200);
      const acknowledged: { libraryId: string; videoId: string; title: string }[] = [];
      let writing = true;
      const writeErrors: string[] = [];
      const writer = (async () => {
        for (let n = 0; writing; n++) {
          const library = await t.request("POST", "/v1/media/libraries", { json: { name: `lib ${n}` } });
          if (library.status !== 201) {
            writeErrors.push(library.text);
            break;
          }
          const libraryId = library.body.data.id as string;
          const title = `video ${n}`;
          const video = await t.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
            json: { title },
          });
          if (video.status !== 201) {
            writeErrors.push(video.text);
            break;
          }
          const videoId = video.body.data.id as string;
          const source = await t.request("PUT", `/v1/media/libraries/${libraryId}/videos/${videoId}/source`, {
            body: new TextEncoder().encode(`bytes of ${title}`),
            headers: { "content-type": "video/mp4" },
          });
          if (source.status >= 300) {
            writeErrors.push(source.text);
            break;
          }
          acknowledged.push({ libraryId, videoId, title });
        }
      })();

      // Let the writer acknowledge some work, then remember what was acknowledged before the backup.
      while (acknowledged.length < 5 && writeErrors.length === 0)
        await new Promise((resolve) => setImmediate(resolve));
      const before = [...acknowledged];
      const blobsBefore = filesUnder(join(t.store.dataDir, "blobs"));
      const target = join(tempDir(), "backup");
      const backedUp = await runCli(["backup", "--to", target], { CUMULO_DATA_DIR: t.store.dataDir });
      const afterBackup = acknowledged.length;
      writing = false;
      await writer;
      expect(backedUp.stderr).toBe("");
      expect(backedUp.code).toBe(0);
      expect(writeErrors).toEqual([]);
      // The store is one file: no -wal or -shm beside it.
      expect(readdirSync(target).filter((name) => name.startsWith("cumulo.sqlite"))).toEqual([
        "cumulo.sqlite",
      ]);
      // The writes really overlapped the backup.
      expect(afterBackup).toBeGreaterThan(before.length);
      const manifest = JSON.parse(readFileSync(join(target, "manifest.json"), "utf8"));
      expect(manifest).toMatchObject({
        format: 1,
        secret_key_file: true,
        blobs: { store: "local", included: true },
      });
      expect(manifest.migrations.length).toBeGreaterThan(0);

      // A second backup into the same directory is refused.
      const again = await runCli(["backup", "--to", target], { CUMULO_DATA_DIR: t.store.dataDir });
      expect(again.code).not.toBe(0);
      expect(again.stderr).toMatch(/is not empty/);
      // Nor into the data dir itself: the copy would copy itself, and nothing is written there.
      const inside = join(t.store.dataDir, "blobs", "backup");
      const refusedInside = await runCli(["backup", "--to", inside], { CUMULO_DATA_DIR: t.store.dataDir });
      expect(refusedInside.code).not.toBe(0);
      expect(refusedInside.stderr).toMatch(/is inside CUMULO_DATA_DIR/);
      expect(existsSync(inside)).toBe(false);
      // Through a link to the data dir too.
      const link = join(tempDir(), "link-to-data");
      symlinkSync(t.store.dataDir, link);
      const throughLink = join(link, "blobs", "backup");
      const refusedLink = await runCli(["backup", "--to", throughLink], { CUMULO_DATA_DIR: t.store.dataDir });
      expect([refusedLink.code === 0, refusedLink.stderr]).toEqual([
        false,
        expect.stringMatching(/is inside CUMULO_DATA_DIR/),
      ]);
      expect(existsSync(inside)).toBe(false);

      const restoredDir = join(tempDir(), "data");
      const restored = await runCli(["restore", "--from", target], { CUMULO_DATA_DIR: restoredDir });
      expect(restored.stderr).toBe("");
      expect(restored.code).toBe(0);
      // Every blob acknowledged before the backup began came back byte for byte.
      const blobsRestored = filesUnder(join(restoredDir, "blobs"));
      expect(blobsRestored).toEqual(expect.arrayContaining(blobsBefore));
      for (const path of blobsBefore) {
        expect(readFileSync(join(restoredDir, "blobs", path))).toEqual(
          readFileSync(join(t.store.dataDir, "blobs", path)),
        );
      }

      const restoredStore: TestStore = {
        kind: "sqlite",
        dataDir: restoredDir,
        databaseUrl: undefined,
        redisPrefix: `${t.store.redisPrefix}restored:`,
        drop: async () => {},
      };
      const second = await startTestApp({ CUMULO_ROLES: "api" }, { store: restoredStore });
      try {
        for (const { libraryId, videoId, title } of before) {
          const video = await second.request("GET", `/v1/media/libraries/${libraryId}/videos/${videoId}`);
          expect(video.status).toBe(200);
          expect(video.body.data.title).toBe(title);
        }
        // The restored secret key decrypts the stored S3 secret.
        const restoredStorage = await second.cloud("GET", "/v1/storage/user");
        expect(restoredStorage.status).toBe(200);
        expect(restoredStorage.body).toEqual(storage.body);
      } finally {
        await second.close();
      }
    });

    it("leaves blobs in the S3 bucket, says so, and a restored node reads them from there", async () => {
      const s3 = await startTestS3();
      const node = await startTestApp({ ...s3.env, CUMULO_ROLES: "api" });
      try {
        const libraryId = (await createLibrary(node)).id;
        const videoId = (await createVideo(node, libraryId)).id;
        const data = new FormData();
        data.set("title", "English");
        data.set("language", "en");
        data.set("file", new Blob(["WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nHi\n"]), "en.vtt");
        const subtitle = await node.request(
          "POST",
          `/v1/media/libraries/${libraryId}/videos/${videoId}/subtitles`,
          {
            body: data,
          },
        );
        expect(subtitle.status, subtitle.text).toBe(201);

        const target = join(tempDir(), "backup");
        const backedUp = await runCli(["backup", "--to", target], {
          ...s3.env,
          CUMULO_DATA_DIR: node.store.dataDir,
        });
        expect(backedUp.code, backedUp.stderr).toBe(0);
        expect(backedUp.stderr).toMatch(/not copied: they stay in S3 bucket cumulo-test/);
        const manifest = JSON.parse(readFileSync(join(target, "manifest.json"), "utf8"));
        expect(manifest.blobs).toEqual({ store: "s3", bucket: "cumulo-test", included: false });
        expect(readdirSync(target)).not.toContain("blobs");

        const restoredDir = join(tempDir(), "data");
        // Restored by a command without the S3 settings: it says where the files are to be found.
        const restored = await runCli(["restore", "--from", target], { CUMULO_DATA_DIR: restoredDir });
        expect(restored.code, restored.stderr).toBe(0);
        expect(restored.stderr).toMatch(
          /^The blobs are not in this backup: they are in S3 bucket cumulo-test; start the nodes with CUMULO_BLOB_STORE=s3 and that bucket/m,
        );
        const second = await startTestApp(
          { ...s3.env, CUMULO_ROLES: "api" },
          { store: { ...node.store, dataDir: restoredDir, drop: async () => {} } },
        );
        try {
          const listed = await second.request(
            "GET",
            `/v1/media/libraries/${libraryId}/videos/${videoId}/subtitles`,
          );
          expect(listed.status).toBe(200);
          const path = listed.body.data[0]?.path as string;
          expect(path).toBe(subtitle.body.data.path);
          expect(await second.cumulo.services.blobs.exists(path)).toBe(true);
        } finally {
          await second.close();
        }
      } finally {
        await node.close();
        await s3.close();
      }
    });

    // Run as another account (root reads any file), which needs root and util-linux's setpriv.
    it.runIf(process.getuid?.() === 0 && existsSync("/usr/bin/setpriv"))(
      "names the store an account cannot read, and leaves no directory behind",
      async () => {
        const home = tempDir();
        const dataDir = join(home, "data");
        expect((await runCli(["migrate"], { CUMULO_DATA_DIR: dataDir })).code).toBe(0);
        chmodSync(home, 0o755);
        chmodSync(dataDir, 0o755);
        chmodSync(join(dataDir, "cumulo.sqlite"), 0o600);
        const shared = tempDir();
        chmodSync(shared, 0o777);
        const target = join(shared, "backup");
        const asNobody = spawnSync(
          "setpriv",
          [
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            process.execPath,
            BIN,
            "backup",
            "--to",
            target,
          ],
          { env: { ...process.env, CUMULO_DATA_DIR: dataDir, CUMULO_LOG_LEVEL: "silent" }, encoding: "utf8" },
        );
        expect(asNobody.status).toBe(1);
        // Before: "cumulo: unable to open database file", and an empty backup directory left behind.
        expect(asNobody.stderr).toBe(
          `cumulo: cannot read the store in CUMULO_DATA_DIR (${dataDir}/cumulo.sqlite): EACCES: permission denied, access '${dataDir}/cumulo.sqlite'; run the backup as the account that runs the server. Nothing was backed up\n`,
        );
        expect(existsSync(target)).toBe(false);
      },
    );

    it("restores only into an empty data dir and only from a backup", async () => {
      const target = join(tempDir(), "backup");
      expect((await runCli(["backup", "--to", target], { CUMULO_DATA_DIR: t.store.dataDir })).code).toBe(0);

      const busy = tempDir();
      writeFileSync(join(busy, "cumulo.sqlite"), "");
      const refused = await runCli(["restore", "--from", target], { CUMULO_DATA_DIR: busy });
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toMatch(
        /is not empty \(or not a directory\); restore only into an empty data dir/,
      );
      expect(readFileSync(join(busy, "cumulo.sqlite"), "utf8")).toBe("");

      // A file where a directory belongs: refused in the same words, not with a system error.
      const file = join(tempDir(), "a-file");
      writeFileSync(file, "");
      const intoFile = await runCli(["restore", "--from", target], { CUMULO_DATA_DIR: file });
      expect(intoFile.stderr).toMatch(
        /^cumulo: CUMULO_DATA_DIR .* is not empty \(or not a directory\); restore only into an empty data dir/,
      );
      const toFile = await runCli(["backup", "--to", file], { CUMULO_DATA_DIR: t.store.dataDir });
      expect(toFile.stderr).toMatch(
        /^cumulo: --to .* is not empty \(or not a directory\); give a new or empty directory/,
      );
      expect(readFileSync(file, "utf8")).toBe("");

      const notBackup = await runCli(["restore", "--from", tempDir()], {
        CUMULO_DATA_DIR: join(tempDir(), "d"),
      });
      expect(notBackup.code).not.toBe(0);
      expect(notBackup.stderr).toMatch(/is not a complete backup/);

      // From a newer Cumulo: refused before anything is copied (the server would not start on it).
      const manifestFile = join(target, "manifest.json");
      const manifest = JSON.parse(readFileSync(manifestFile, "utf8"));
      writeFileSync(
        manifestFile,
        JSON.stringify({ ...manifest, migrations: [...manifest.migrations, "0900-future"] }),
      );
      const newerInto = join(tempDir(), "d");
      const newer = await runCli(["restore", "--from", target], { CUMULO_DATA_DIR: newerInto });
      expect(newer.code).not.toBe(0);
      expect(newer.stderr).toMatch(/migrations this version does not know \(0900-future\)/);
      expect(existsSync(join(newerInto, "cumulo.sqlite"))).toBe(false);
    });

    // QA of 6 December (session 46): an older build backed up a newer build's store, and named itself
    // in the manifest.
    it("refuses to back up a store a newer Cumulo migrated, and leaves nothing behind", async () => {
      const dataDir = join(tempDir(), "data");
      expect((await runCli(["migrate"], { CUMULO_DATA_DIR: dataDir })).code).toBe(0);
      const store = new SqliteDatabase(join(dataDir, "cumulo.sqlite"));
      store
        .prepare("INSERT INTO kysely_migration (name, timestamp) VALUES (?, ?)")
        .run("0900-future", new Date().toISOString());
      store.close();
      // Nor the parents it made for the target (QA of session 47).
      const home = tempDir();
      const target = join(home, "nested", "deeper", "backup");
      const refused = await runCli(["backup", "--to", target], { CUMULO_DATA_DIR: dataDir });
      expect([refused.code, refused.stderr]).toEqual([
        1,
        "cumulo: the store was migrated by a newer Cumulo (migrations this version does not know: 0900-future); back it up with that version or a newer one. Nothing was backed up\n",
      ]);
      expect(readdirSync(home)).toEqual([]);

      // A link to nothing is no empty directory: refused, and the link is left as it was.
      const dangling = join(home, "dangling");
      symlinkSync(join(home, "nowhere"), dangling);
      const toLink = await runCli(["backup", "--to", dangling], { CUMULO_DATA_DIR: t.store.dataDir });
      expect(toLink.stderr).toMatch(
        /^cumulo: --to .* is not empty \(or not a directory\); give a new or empty directory/,
      );
      expect(readdirSync(home)).toEqual(["dangling"]);
      // Under such a link, the link is named rather than mkdir's bare ENOENT (QA of session 47).
      const underLink = await runCli(["backup", "--to", join(dangling, "backup")], {
        CUMULO_DATA_DIR: t.store.dataDir,
      });
      expect([underLink.code, underLink.stderr]).toEqual([1, `cumulo: ${dangling} is a link to nothing\n`]);
      expect(readdirSync(home)).toEqual(["dangling"]);
    });

    it("refuses a damaged backup before it writes anything, so the restore can be run again", async () => {
      const library = await t.request("POST", "/v1/media/libraries", { json: { name: "kept" } });
      await t.request("POST", `/v1/media/libraries/${library.body.data.id}/videos`, {
        json: { title: "kept" },
      });
      const target = join(tempDir(), "backup");
      expect((await runCli(["backup", "--to", target], { CUMULO_DATA_DIR: t.store.dataDir })).code).toBe(0);
      const damaged = (change: (copy: string) => void) => {
        const copy = join(tempDir(), "backup");
        cpSync(target, copy, { recursive: true });
        change(copy);
        return copy;
      };
      const cases = [
        // Cut short (a copy to a disk that filled up, an interrupted transfer).
        {
          from: damaged((copy) => truncateSync(join(copy, "cumulo.sqlite"), 8192)),
          message: /is damaged: cumulo\.sqlite is not a sound Cumulo store \(.+\); nothing was restored/,
        },
        // Cut to nothing: an empty SQLite database, which a server started on as a new platform
        // (QA of 4 December, session 41).
        {
          from: damaged((copy) => truncateSync(join(copy, "cumulo.sqlite"), 0)),
          message:
            /is damaged: cumulo\.sqlite is not a sound Cumulo store \(no such table: kysely_migration\)/,
        },
        {
          from: damaged((copy) => {
            const manifestFile = join(copy, "manifest.json");
            const manifest = JSON.parse(readFileSync(manifestFile, "utf8"));
            writeFileSync(
              manifestFile,
              JSON.stringify({ ...manifest, migrations: manifest.migrations.slice(0, 3) }),
            );
          }),
          message: /is not a sound Cumulo store \(its migrations are not the 3 that manifest\.json lists\)/,
        },
        {
          from: damaged((copy) => rmSync(join(copy, "blobs"), { recursive: true })),
          message:
            /is damaged: blobs\/ is missing, though manifest\.json says the media files were backed up/,
        },
        {
          from: damaged((copy) => writeFileSync(join(copy, "manifest.json"), "{")),
          message: /is damaged: manifest\.json cannot be read \(.+\); nothing was restored/,
        },
        {
          from: damaged((copy) => writeFileSync(join(copy, "manifest.json"), JSON.stringify({ format: 2 }))),
          message: /is damaged: manifest\.json is not of a backup format this version reads \(1\)/,
        },
        {
          from: damaged((copy) => {
            const manifestFile = join(copy, "manifest.json");
            const manifest = JSON.parse(readFileSync(manifestFile, "utf8"));
            writeFileSync(manifestFile, JSON.stringify({ ...manifest, secret_key_file: true }));
            rmSync(join(copy, "cloud-secret.key"), { force: true });
          }),
          message:
            /is damaged: cloud-secret\.key is missing, though manifest\.json says it was backed up; nothing was restored/,
        },
      ];
      for (const { from, message } of cases) {
        const into = join(tempDir(), "d");
        const refused = await runCli(["restore", "--from", from], { CUMULO_DATA_DIR: into });
        expect(refused.code).not.toBe(0);
        expect(refused.stderr).toMatch(message);
        expect(existsSync(into) ? readdirSync(into) : []).toEqual([]);
      }
    });
  },
);

it("cumulo backup refuses on PostgreSQL and points to the documented procedure", async () => {
  const dir = mkdtempSync(join(tmpdir(), "cumulo-backup-"));
  try {
    const result = await runCli(["backup", "--to", join(dir, "backup")], {
      CUMULO_DATA_DIR: join(dir, "data"),
      DATABASE_URL: "postgres://nobody@127.0.0.1:1/none",
    });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/pg_dump.*docs\/operations\.md/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// The store in the process's own SQLite file, without a server: what matters is another connection
// committing while the copy runs.
it.runIf(testStoreKind() === "sqlite")(
  "finishes a backup of a store of many pages while another connection commits all the time",
  { timeout: 60_000 },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), "cumulo-backup-"));
    const dataDir = join(dir, "data");
    mkdirSync(dataDir);
    const file = join(dataDir, "cumulo.sqlite");
    const writer = new SqliteDatabase(file);
    try {
      writer.pragma("journal_mode = WAL");
      writer.exec("CREATE TABLE kysely_migration (name TEXT PRIMARY KEY)");
      writer.exec("INSERT INTO kysely_migration VALUES ('0001-identity')");
      writer.exec("CREATE TABLE filler (id INTEGER PRIMARY KEY, data BLOB)");
      const insert = writer.prepare("INSERT INTO filler (data) VALUES (?)");
      // About 20 MB: some 5,000 pages, 50 steps of the backup API's default 100 pages.
      writer.transaction(() => {
        for (let row = 0; row < 5_000; row++) insert.run(Buffer.alloc(4_000, row % 256));
      })();
      // A commit between every two steps, as a busy server's flushes and heartbeats make.
      const tick = writer.prepare("UPDATE filler SET data = ? WHERE id = 1");
      let writing = true;
      const commits = (async () => {
        for (let n = 0; writing; n++) {
          tick.run(Buffer.alloc(4_000, n % 256));
          await new Promise((resolve) => setImmediate(resolve));
        }
      })();
      const outcome = await Promise.race([
        backup(loadConfig({ CUMULO_DATA_DIR: dataDir }), join(dir, "backup")),
        new Promise((resolve) => setTimeout(() => resolve({ outcome: "still copying after 20 s" }), 20_000)),
      ]);
      writing = false;
      await commits;
      expect(outcome).toMatchObject({ outcome: "backed_up", manifest: { migrations: ["0001-identity"] } });
    } finally {
      writer.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
