import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { edgeRequest, edgeUrlOf } from "../cdn/support.ts";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { testMediaTools } from "../support/media.ts";
import { waitUntil } from "../support/wait.ts";
import {
  pathOf,
  playlistUris,
  resolvePath,
  uploadSource,
  videoPath,
  waitForStatus,
} from "../video/support.ts";
import { createEndpoint, organizationOf, type Receiver, startReceiver } from "../webhooks/helpers.ts";

/** Not a video at all: with instant processing the source is never read. */
const NOT_A_VIDEO = new TextEncoder().encode("these bytes are no video");

describe("state transitions: instant processing and provisioning, or a stop at a stage", () => {
  let t: TestApp;
  let receiver: Receiver;
  let organizationId: string;
  const tools = testMediaTools();

  beforeAll(async () => {
    receiver = await startReceiver();
    t = await startTestApp({
      CUMULO_DEV_MODE: "true",
      CUMULO_EDGE_PORT: "0",
      CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
    });
    organizationId = await organizationOf(t);
  });
  afterAll(async () => {
    await receiver.close();
    await t.close();
  });

  const setTransitions = (json: Record<string, unknown>) =>
    t.request("PUT", "/_cumulo/transitions", { json });
  /** The processing job of a video has finished (stopped or done). */
  const jobDone = (videoId: string) =>
    waitUntil(async () => {
      const jobs = await t.cumulo.store.db.selectFrom("jobs").select(["status", "payload"]).execute();
      return jobs.find((row) => row.payload.includes(videoId) && row.status === "done");
    });

  it("processes a video at once into placeholder renditions that play, with every stage announced", async () => {
    const set = await setTransitions({ organization_id: organizationId, video: "instant" });
    expect(set.status, set.text).toBe(200);
    expect(set.body.organizations).toEqual([{ organization_id: organizationId, video: "instant" }]);
    expect(set.body.default).toEqual({ video: "real", library: "real" });

    const libraryId = (await createLibrary(t, { name: "Instant", default_privacy: "public" })).id;
    await createEndpoint(t, libraryId, { url: `${receiver.url}/hook`, events: ["*"] });
    const videoId = (await createVideo(t, libraryId, { title: "Placeholder" })).id;
    // What the release before kept, in a format not read any more.
    const earlier = join(t.store.dataDir, "devmode", "placeholder-v1");
    mkdirSync(earlier, { recursive: true });
    writeFileSync(join(earlier, "probe.json"), "{}");
    expect((await uploadSource(t, libraryId, videoId, NOT_A_VIDEO)).status).toBe(202);
    const ready = await waitForStatus(t, libraryId, videoId, ["ready", "failed"]);
    expect(ready).toMatchObject({ status: "ready", duration: 2, thumbnail_count: 1 });
    expect(existsSync(earlier)).toBe(false);
    // Its subtitles are mapped to where its segments start, as a transcoded video's are.
    const processing = await t.cumulo.store.db
      .selectFrom("video_processing")
      .select("timeline_start_pts")
      .where("video_id", "=", videoId)
      .executeTakeFirstOrThrow();
    expect(Number(processing.timeline_start_pts)).toBeGreaterThan(126_000);

    // The same notifications as real processing. An endpoint receives up to 8 at once, so they may
    // arrive in any order: sorted by stage, their notification times never go back.
    const stages = ["created", "uploading", "processing", "transcoding", "packaging", "ready"];
    const events = await waitUntil(() => {
      const mine = receiver.received
        .map((entry) => JSON.parse(entry.body))
        .filter((body) => body.payload?.video_id === videoId);
      return mine.length >= stages.length ? mine : undefined;
    });
    expect(events.map((body) => body.event).sort()).toEqual([...stages].sort());
    events.sort((a, b) => stages.indexOf(a.event) - stages.indexOf(b.event));
    const times = events.map((body) => body.notification_time as number);
    expect(times).toEqual([...times].sort((a, b) => a - b));
    for (const body of events) expect(body.payload.status).toBe(body.event);
    expect(events.at(-1).payload.manifest_url).toBe(ready.manifest_url);

    // Valid media: every file is served through the edge, and ffprobe reads the HLS ladder (a copy
    // of what the edge served, as a player would fetch it) and the MP4.
    const edge = edgeUrlOf(t);
    const work = mkdtempSync(join(tmpdir(), "cumulo-dev-placeholder-"));
    try {
      const masterPath = pathOf(ready.manifest_url);
      const master = await edgeRequest(edge, masterPath);
      expect(master.status).toBe(200);
      writeFileSync(join(work, "playlist.m3u8"), master.body);
      for (const media of playlistUris(master.text)) {
        const mediaPath = resolvePath(masterPath, media);
        const mediaPlaylist = await edgeRequest(edge, mediaPath);
        expect(mediaPlaylist.text).toContain("#EXT-X-ENDLIST");
        mkdirSync(dirname(join(work, media)), { recursive: true });
        writeFileSync(join(work, media), mediaPlaylist.body);
        for (const segment of playlistUris(mediaPlaylist.text)) {
          const answer = await edgeRequest(edge, resolvePath(mediaPath, segment));
          expect(answer.status).toBe(200);
          writeFileSync(join(dirname(join(work, media)), segment), answer.body);
        }
      }
      // Every frame of the ladder decodes: 2 s of 25 fps video, and audio (ffmpeg, not ffprobe: the
      // shipped static ffprobe crashes on MPEG-TS, see test/video/transcoder.test.ts).
      await tools.ffmpeg([
        "-i",
        join(work, "playlist.m3u8"),
        "-map",
        "0",
        "-f",
        "framemd5",
        join(work, "frames"),
      ]);
      const frames = readFileSync(join(work, "frames"), "utf8");
      const types = Object.fromEntries(
        [...frames.matchAll(/^#media_type (\d+): (\w+)$/gm)].map((m) => [m[2], m[1]]),
      );
      const count = (index: string | undefined) =>
        frames.split("\n").filter((line) => line.startsWith(`${index},`)).length;
      expect(count(types.video)).toBe(50);
      expect(count(types.audio)).toBeGreaterThan(0);
      const mp4 = await edgeRequest(edge, pathOf(ready.direct_play_url));
      writeFileSync(join(work, "play.mp4"), mp4.body);
      expect(await tools.probe(join(work, "play.mp4"))).toMatchObject({
        videoCodec: "h264",
        height: 240,
        audioTracks: [expect.objectContaining({ stream: 1 })],
        durationS: expect.closeTo(2, 0),
      });
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    expect((await edgeRequest(edge, pathOf(ready.thumbnail_url))).status).toBe(200);
  }, 120_000);

  it("stops a video at a chosen stage, where it stays", async () => {
    await setTransitions({ organization_id: organizationId, video: { stop_at: "transcoding" } });
    const libraryId = (await createLibrary(t, { name: "Stopped videos" })).id;
    const videoId = (await createVideo(t, libraryId, { title: "Held" })).id;
    expect((await uploadSource(t, libraryId, videoId, NOT_A_VIDEO)).status).toBe(202);
    await jobDone(videoId);
    const held = await t.request("GET", videoPath(libraryId, videoId));
    expect(held.body.data).toMatchObject({ status: "transcoding", duration: 2, manifest_url: "" });

    // A new upload after the rule is lifted goes all the way.
    await setTransitions({ organization_id: organizationId, video: "instant" });
    expect((await uploadSource(t, libraryId, videoId, NOT_A_VIDEO)).status).toBe(202);
    expect((await waitForStatus(t, libraryId, videoId, ["ready", "failed"])).status).toBe("ready");
  });

  it("provisions a library at once, or leaves it provisioning", async () => {
    await setTransitions({ library: "instant" });
    const created = await t.request("POST", "/v1/media/libraries", { json: { name: "At once" } });
    // The answer is the contract's new library; by the next call it is active.
    expect(created.body.data.status).toBe("provisioning");
    const got = await t.request("GET", `/v1/media/libraries/${created.body.data.id}`);
    expect(got.body.data.status).toBe("active");

    const other = await t.createOrganization("Held back");
    await setTransitions({ organization_id: other.organizationId, library: { stop_at: "provisioning" } });
    const held = await createLibrary(t, { name: "Held" }, other.key);
    await waitUntil(async () => {
      const jobs = await t.cumulo.store.db.selectFrom("jobs").select(["status", "payload"]).execute();
      return jobs.find((row) => row.payload.includes(held.id) && row.status === "done");
    });
    const stays = await t.request("GET", `/v1/media/libraries/${held.id}`, { key: other.key });
    expect(stays.body.data.status).toBe("provisioning");
    // The rule of one organization leaves the others on the default.
    const mine = await createLibrary(t, { name: "Mine" });
    expect((await t.request("GET", `/v1/media/libraries/${mine.id}`)).body.data.status).toBe("active");

    const listed = await t.request("GET", "/_cumulo/transitions");
    expect(listed.body.default).toEqual({ video: "real", library: "instant" });
    expect(listed.body.organizations).toContainEqual({
      organization_id: other.organizationId,
      library: { stop_at: "provisioning" },
    });
    expect(
      (await t.request("DELETE", `/_cumulo/transitions?organization_id=${other.organizationId}`)).status,
    ).toBe(204);
    expect((await t.request("DELETE", "/_cumulo/transitions")).status).toBe(204);
    expect((await t.request("GET", "/_cumulo/transitions")).body).toEqual({
      default: { video: "real", library: "real" },
      organizations: [],
    });
  });

  it("refuses a rule that names nothing or an unknown stage", async () => {
    const empty = await setTransitions({});
    expect(empty.status).toBe(400);
    expect(
      empty.body.errors.map((error: { field: string; code: string }) => `${error.field}:${error.code}`),
    ).toEqual(["video:validation_required", "library:validation_required"]);
    expect((await setTransitions({ video: { stop_at: "ready" } })).status).toBe(400);
    expect((await setTransitions({ library: "fast" })).status).toBe(400);
    await t.request("DELETE", "/_cumulo/transitions");
  });

  it("refuses a rule, a fault or a recording for an organization that does not exist: 404", async () => {
    const nobody = "00000000-0000-4000-8000-000000000000";
    const rule = await setTransitions({ organization_id: nobody, video: "instant" });
    expect(rule.status, rule.text).toBe(404);
    expect(rule.body.message).toBe("Resource not found");
    const fault = await t.request("POST", "/_cumulo/faults", {
      json: { organization_id: nobody, status: 503 },
    });
    expect(fault.status, fault.text).toBe(404);
    const recording = await t.request("POST", "/_cumulo/recording", {
      json: { organization_id: nobody, recording: true },
    });
    expect(recording.status, recording.text).toBe(404);
    // Dropping them, or downloading the recording, is refused alike: a typo is not a silent success.
    for (const path of ["/_cumulo/transitions", "/_cumulo/recording"]) {
      const dropped = await t.request("DELETE", `${path}?organization_id=${nobody}`);
      expect(dropped.status, `DELETE ${path}`).toBe(404);
      expect(dropped.body).toEqual(rule.body);
    }
    const har = await t.request("GET", `/_cumulo/recording.har?organization_id=${nobody}`);
    expect(har.status, har.text).toBe(404);
    expect(har.body).toEqual(rule.body);
    expect((await t.request("GET", "/_cumulo/transitions")).body.organizations).toEqual([]);
    expect((await t.request("GET", "/_cumulo/faults")).body).toEqual({ faults: [] });
    expect((await t.request("GET", "/_cumulo/recording")).body).toEqual({ recordings: [] });
  });

  it("drops the rules and the recording of an organization removed since", async () => {
    const gone = await t.createOrganization("Gone");
    const id = gone.organizationId;
    expect((await setTransitions({ organization_id: id, video: "instant" })).status).toBe(200);
    const on = await t.request("POST", "/_cumulo/recording", {
      json: { organization_id: id, recording: true },
    });
    expect(on.status, on.text).toBe(200);
    await createLibrary(t, { name: "Recorded" }, gone.key);
    const removed = await t.request("POST", "/_cumulo/state/reset", {
      json: { organization_id: id, to: "empty" },
    });
    expect(removed.status, removed.text).toBe(200);
    // What was held for it can still be read and let go of, once.
    const har = await t.request("GET", `/_cumulo/recording.har?organization_id=${id}`);
    expect(har.status, har.text).toBe(200);
    expect(har.body.log.entries.length).toBeGreaterThan(0);
    for (const path of ["/_cumulo/transitions", "/_cumulo/recording"]) {
      expect((await t.request("DELETE", `${path}?organization_id=${id}`)).status, path).toBe(204);
      expect((await t.request("DELETE", `${path}?organization_id=${id}`)).status, path).toBe(404);
    }
    expect((await t.request("GET", "/_cumulo/transitions")).body.organizations).toEqual([]);
    expect((await t.request("GET", "/_cumulo/recording")).body).toEqual({ recordings: [] });
  });
});
