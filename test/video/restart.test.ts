import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/store/database.ts";
import { locateMediaTools } from "../../src/video/media-tools.ts";
import { PROCESS_JOB } from "../../src/video/pipeline.ts";
import { startTestApp } from "../support/app.ts";
import { ffmpegsIn, generateClip } from "../support/media.ts";
import { exitOf, type Served, serve } from "../support/process.ts";
import { createMigratedTestStore, type TestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import { type Receiver, startReceiver } from "../webhooks/helpers.ts";

const KEY = "video_restart_key_0123456789abcdef";

describe("video processing across a crash", () => {
  let store: TestStore;
  let work: string;
  let receiver: Receiver;
  let env: Record<string, string | undefined>;
  const running: Served[] = [];
  const headers = { authorization: `Bearer ${KEY}` };

  beforeAll(async () => {
    store = await createMigratedTestStore();
    work = mkdtempSync(join(tmpdir(), "cumulo-video-restart-"));
    receiver = await startReceiver();
    env = {
      CUMULO_DATA_DIR: store.dataDir,
      DATABASE_URL: store.databaseUrl,
      CUMULO_BOOTSTRAP_API_KEY: KEY,
      CUMULO_RATE_LIMIT: "100000/1m",
      CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
      // One ffmpeg at a time keeps the job in its stages long enough to be caught there.
      CUMULO_FFMPEG_CONCURRENCY: "1",
    };
  });
  afterAll(async () => {
    for (const served of running) served.child.kill("SIGKILL");
    await receiver?.close();
    await store?.drop();
    rmSync(work, { recursive: true, force: true });
  });

  it("takes a job whose worker was killed mid-processing up again and reaches ready, stages announced once", async () => {
    const clip = await generateClip(work, { seconds: 4, width: 854, height: 480 });
    const first = await serve(env);
    running.push(first);
    const call = async (base: string, method: string, path: string, init: RequestInit = {}) => {
      const response = await fetch(`${base}${path}`, {
        method,
        ...init,
        headers: { ...headers, ...init.headers },
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    const json = (body: unknown) => ({
      body: JSON.stringify(body),
      headers: { "content-type": "application/json" },
    });
    const library = await call(first.apiUrl, "POST", "/v1/media/libraries", json({ name: "Crash" }));
    const libraryId = library.body.data.id;
    const hook = await call(
      first.apiUrl,
      "POST",
      `/v1/media/libraries/${libraryId}/webhooks`,
      json({ name: "hook", url: `${receiver.url}/hook`, events: ["*"] }),
    );
    expect(hook.status).toBe(201);
    const video = await call(
      first.apiUrl,
      "POST",
      `/v1/media/libraries/${libraryId}/videos`,
      json({ title: "v" }),
    );
    const videoPath = `/v1/media/libraries/${libraryId}/videos/${video.body.data.id}`;
    const upload = await call(first.apiUrl, "PUT", `${videoPath}/source`, {
      body: readFileSync(clip),
      headers: { "content-type": "video/mp4" },
    });
    expect(upload.status).toBe(202);

    await waitUntil(
      async () => (await call(first.apiUrl, "GET", videoPath)).body.data.status === "transcoding",
      30_000,
      "transcoding",
    );
    first.child.kill("SIGKILL");
    await exitOf(first.child);

    const second = await serve(env);
    running.push(second);
    const ready = await waitUntil(
      async () => {
        const data = (await call(second.apiUrl, "GET", videoPath)).body.data;
        if (data.status === "failed") throw new Error("processing failed after the restart");
        return data.status === "ready" ? data : undefined;
      },
      60_000,
      "ready after restart",
    );
    expect(ready.duration).toBe(4);
    expect(ready.manifest_url).toMatch(/\/playlist\.m3u8$/);

    // Every stage reaches the receiver, each as exactly one notification (one webhook-id). A delivery in
    // flight when the server died is sent again once its lease runs out, so it may arrive after later
    // stages: delivery is at least once, and ordered only while nothing crashes.
    const stages = ["created", "uploading", "processing", "transcoding", "packaging", "ready"];
    const byEvent = await waitUntil(() => {
      const ids = new Map<string, Set<string>>();
      for (const entry of receiver.received) {
        const event = (JSON.parse(entry.body) as { event: string }).event;
        ids.set(event, (ids.get(event) ?? new Set()).add(String(entry.headers["webhook-id"])));
      }
      return stages.every((stage) => ids.has(stage)) ? ids : undefined;
    }, 60_000);
    expect([...byEvent.keys()].sort()).toEqual([...stages].sort());
    for (const stage of stages) expect(byEvent.get(stage)?.size, stage).toBe(1);
    second.child.kill("SIGTERM");
    await exitOf(second.child);
  }, 180_000);

  it("ends its ffmpeg at SIGTERM and leaves the video to the next start, which makes it ready", async () => {
    const clip = await generateClip(work, { seconds: 10, width: 854, height: 480 });
    const first = await serve(env);
    running.push(first);
    const call = async (
      base: string,
      method: string,
      path: string,
      body?: string | Uint8Array,
      type = "application/json",
    ) => {
      const response = await fetch(`${base}${path}`, {
        method,
        body,
        headers: { ...headers, ...(body ? { "content-type": type } : {}) },
      });
      return (await response.json()) as any;
    };
    const libraryId = (
      await call(first.apiUrl, "POST", "/v1/media/libraries", JSON.stringify({ name: "Stop" }))
    ).data.id;
    const videoId = (
      await call(
        first.apiUrl,
        "POST",
        `/v1/media/libraries/${libraryId}/videos`,
        JSON.stringify({ title: "v" }),
      )
    ).data.id;
    const videoPath = `/v1/media/libraries/${libraryId}/videos/${videoId}`;
    await call(first.apiUrl, "PUT", `${videoPath}/source`, readFileSync(clip), "video/mp4");
    await waitUntil(
      async () => (await call(first.apiUrl, "GET", videoPath)).data.status === "transcoding",
      30_000,
      "transcoding",
    );
    first.child.kill("SIGTERM");
    expect(await exitOf(first.child)).toBe(0);
    // Nothing of the stopped process runs on: no ffmpeg working in its data dir.
    expect(ffmpegsIn(store.dataDir)).toEqual([]);
    // The work was given up, not finished: due again at once, the video still in its stage.
    const stopped = openStore({ dataDir: store.dataDir, databaseUrl: store.databaseUrl });
    try {
      const job = await stopped.db
        .selectFrom("jobs")
        .select(["status", "payload"])
        .where("kind", "=", PROCESS_JOB)
        .execute();
      expect(job.filter((row) => row.payload.includes(videoId)).map((row) => row.status)).toEqual([
        "pending",
      ]);
      const video = await stopped.db
        .selectFrom("media_videos")
        .select("status")
        .where("id", "=", videoId)
        .executeTakeFirst();
      expect(video?.status).toBe("transcoding");
    } finally {
      await stopped.close();
    }

    const second = await serve(env);
    running.push(second);
    const ready = await waitUntil(
      async () => {
        const data = (await call(second.apiUrl, "GET", videoPath)).data;
        if (data.status === "failed") throw new Error("processing failed after the restart");
        return data.status === "ready" ? data : undefined;
      },
      60_000,
      "ready after restart",
    );
    expect(ready.duration).toBe(10);
    second.child.kill("SIGTERM");
    await exitOf(second.child);
  }, 180_000);

  it("ends the ffmpeg runs a killed worker left behind when a worker starts on the data dir", async () => {
    const clip = await generateClip(work, { seconds: 1, width: 160, height: 90, audio: false });
    const attempt = join(store.dataDir, "video-work", "left-behind-1");
    mkdirSync(attempt, { recursive: true });
    const source = join(attempt, "source");
    copyFileSync(clip, source);
    const { ffmpeg } = locateMediaTools();
    const endless = ["-nostdin", "-stream_loop", "-1", "-re", "-i", source, "-f", "null", "-"];
    // Started by a shell that exits at once, as a worker killed with SIGKILL leaves its runs: the
    // process is handed to init.
    const orphan = Number(
      execFileSync("sh", ["-c", '"$0" "$@" > /dev/null 2>&1 & echo $!', ffmpeg, ...endless], {
        encoding: "utf8",
      }).trim(),
    );
    // A run of a live process (this one) on the same files is not one to end.
    const owned = spawn(ffmpeg, endless, { stdio: "ignore" });
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      expect(alive(orphan)).toBe(true);
      const t = await startTestApp({ CUMULO_ROLES: "worker" }, { store });
      try {
        await waitUntil(() => !alive(orphan), 5_000, "the left-behind ffmpeg ended");
        expect(owned.exitCode).toBeNull();
        expect(alive(owned.pid ?? 0)).toBe(true);
      } finally {
        await t.close();
      }
    } finally {
      if (alive(orphan)) process.kill(orphan, "SIGKILL");
      owned.kill("SIGKILL");
    }
  });
});
