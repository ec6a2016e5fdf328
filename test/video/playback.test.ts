import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { THROUGH_ANOTHER_DISTRIBUTION } from "../../src/video/media-origin.ts";
import { locateMediaTools } from "../../src/video/media-tools.ts";
import { edgeRequest, edgeUrlOf } from "../cdn/support.ts";
import { createLibrary, createVideo, MISSING_ID } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { generateClip, lavfi, testMediaTools } from "../support/media.ts";
import { waitUntil } from "../support/wait.ts";
import { createEndpoint, organizationOf, type Receiver, startReceiver } from "../webhooks/helpers.ts";
import {
  fileBytes,
  pathOf,
  playlistUris,
  resolvePath,
  uploadSource,
  videoPath,
  waitForStatus,
} from "./support.ts";

const MAX_VIDEO_BYTES = 4 * 1024 * 1024;
const STAGES = ["uploading", "processing", "transcoding", "packaging", "ready"];

describe("video pipeline and playback", () => {
  let t: TestApp;
  let receiver: Receiver;
  let work: string;
  let clip: string;
  let libraryId: string;
  let videoId: string;
  let organizationId: string;
  let ready: any;
  let edge: string;
  const tools = testMediaTools();
  const hostname = () => `${libraryId}.media.cumulo.local`;
  /** A path-style request through the edge for a path under the video. */
  const play = (file: string, headers: Record<string, string> = {}) =>
    edgeRequest(edge, `/${hostname()}/${videoId}/${file}`, { headers });
  const setSecurity = (json: Record<string, unknown>) =>
    t.request("PUT", `/v1/media/libraries/${libraryId}/security`, { json });
  const openSecurity = () =>
    setSecurity({
      referrers: { action: "allow", values: [], enabled: false },
      countries: { action: "deny", values: [], enabled: false },
      video_privacy: "public",
    });

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cumulo-video-play-"));
    receiver = await startReceiver();
    [t, clip] = await Promise.all([
      startTestApp({
        CUMULO_EDGE_PORT: "0",
        CUMULO_WEBHOOK_ALLOW_PRIVATE: "true",
        // An organization's distribution may name this edge as its origin (it is on loopback here).
        CUMULO_ORIGIN_ALLOW_PRIVATE: "true",
        CUMULO_MAX_VIDEO_BYTES: String(MAX_VIDEO_BYTES),
        // The file's status polls and uploads add up past the default budget of one key.
        CUMULO_RATE_LIMIT: "100000/1m",
      }),
      generateClip(work),
    ]);
    edge = edgeUrlOf(t);
    organizationId = await organizationOf(t);
    libraryId = (await createLibrary(t, { name: "Playback", default_privacy: "public" })).id;
    await createEndpoint(t, libraryId, { url: `${receiver.url}/hook`, events: ["*"] });
    videoId = (await createVideo(t, libraryId, { title: "Test <clip>" })).id;
    // A video/* type with parameters is a raw upload too.
    const accepted = await uploadSource(
      t,
      libraryId,
      videoId,
      fileBytes(clip),
      'video/mp4; codecs="avc1.64001f, mp4a.40.2"',
    );
    expect(accepted.status, accepted.text).toBe(202);
    expect(accepted.body.data).toMatchObject({
      id: videoId,
      status: "uploading",
      duration: 0,
      manifest_url: "",
    });
    ready = await waitForStatus(t, libraryId, videoId, ["ready", "failed"]);
  }, 90_000);

  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("reaches ready with durations, counts and absolute URLs on the library's distribution", () => {
    expect(ready.status).toBe("ready");
    expect(ready.duration).toBe(3); // 2.5 s rounds to 3
    expect(ready.formatted_duration).toBe("00:00:03");
    expect(ready.thumbnail_count).toBe(2);
    const base = `${edge}/${hostname()}/${videoId}`;
    expect(ready.manifest_url).toBe(`${base}/playlist.m3u8`);
    expect(ready.direct_play_url).toBe(`${base}/play.mp4`);
    expect(ready.thumbnail_url).toBe(`${base}/thumbnail.jpg`);
    expect(ready.preview_animation_thumbnail_url).toBe(`${base}/preview.webp`);
  });

  it("notifies every stage, in order, with the video data", async () => {
    const events = await waitUntil(() => {
      const mine = receiver.received
        .map((entry) => JSON.parse(entry.body))
        .filter((body) => body.payload?.video_id === videoId);
      return mine.some((body) => body.event === "ready") ? mine : undefined;
    }, 60_000);
    expect(events.map((body) => body.event)).toEqual(["created", ...STAGES]);
    for (const body of events) {
      expect(body.event_type).toBe("video");
      expect(body.payload.status).toBe(body.event);
      expect(body.payload).toMatchObject({ client_id: organizationId, libraryId, video_id: videoId });
    }
    const last = events.at(-1);
    expect(last.payload).toEqual({
      status: "ready",
      duration: 3,
      formatted_duration: "00:00:03",
      video_id: videoId,
      client_id: organizationId,
      libraryId,
      manifest_url: ready.manifest_url,
      thumbnail_url: ready.thumbnail_url,
      thumbnail_count: 2,
      direct_play_url: ready.direct_play_url,
      preview_animation_thumbnail_url: ready.preview_animation_thumbnail_url,
    });
    // The stage that measured the source already carries the duration.
    expect(events.find((body) => body.event === "transcoding").payload.duration).toBe(3);
  });

  it("serves playable HLS through the edge, path-style and host-style", async () => {
    const masterPath = `/${hostname()}/${videoId}/playlist.m3u8`;
    const master = await edgeRequest(edge, masterPath);
    expect(master.status).toBe(200);
    expect(master.headers["content-type"]).toBe("application/vnd.apple.mpegurl");
    expect(master.text.startsWith("#EXTM3U")).toBe(true);
    const hostStyle = await edgeRequest(edge, `/${videoId}/playlist.m3u8`, { host: hostname() });
    expect(hostStyle.status).toBe(200);
    expect(hostStyle.text).toBe(master.text);

    const variants = playlistUris(master.text);
    expect(variants).toEqual(["360p/index.m3u8", "240p/index.m3u8"]);
    const mediaPath = resolvePath(masterPath, variants[1] ?? "");
    const media = await edgeRequest(edge, mediaPath);
    expect(media.status).toBe(200);
    expect(media.text).toContain("#EXT-X-ENDLIST");
    const segments = playlistUris(media.text);
    expect(segments.length).toBeGreaterThan(0);
    const segment = await edgeRequest(edge, resolvePath(mediaPath, segments[0] ?? ""));
    expect(segment.status).toBe(200);
    expect(segment.headers["content-type"]).toBe("video/mp2t");
    expect(segment.body[0]).toBe(0x47);
    const file = join(work, "segment.ts");
    writeFileSync(file, segment.body);
    await tools.ffmpeg(["-i", file, "-f", "null", "-"]); // decodes, so it plays

    expect((await play("480p/index.m3u8")).status).toBe(404);
    expect((await play("../../etc/passwd")).status).toBe(404);
    expect(
      (await edgeRequest(edge, `/${hostname()}/${videoId}/playlist.m3u8`, { method: "POST" })).status,
    ).toBe(405);
  });

  it("fails a source whose picture is larger than any H.264 level holds, before decoding it", async () => {
    // One black 8192x4608 frame: about 100 KB on disk, 38 million pixels (over 1 GB in ffmpeg) to decode.
    const huge = await generateClip(work, { width: 8192, height: 4608, seconds: 1, rate: 1, audio: false });
    const hugeId = (await createVideo(t, libraryId, { title: "Huge" })).id;
    expect((await uploadSource(t, libraryId, hugeId, fileBytes(huge))).status).toBe(202);
    expect((await waitForStatus(t, libraryId, hugeId, ["ready", "failed"])).status).toBe("failed");
    const state = await t.request("GET", `${videoPath(libraryId, hugeId)}/processing`);
    expect(state.body.data.failure_reason).toMatch(/8192x4608.*pixels/);
  }, 60_000);

  it("plays a source only a few pixels high: its one rung is named by its height", async () => {
    const tiny = await generateClip(work, { width: 4, height: 4, seconds: 1, audio: false });
    const tinyId = (await createVideo(t, libraryId, { title: "Tiny" })).id;
    expect((await uploadSource(t, libraryId, tinyId, fileBytes(tiny))).status).toBe(202);
    expect((await waitForStatus(t, libraryId, tinyId, ["ready", "failed"])).status).toBe("ready");
    const masterPath = `/${hostname()}/${tinyId}/playlist.m3u8`;
    const variants = playlistUris((await edgeRequest(edge, masterPath)).text);
    expect(variants).toEqual(["4p/index.m3u8"]);
    const media = await edgeRequest(edge, resolvePath(masterPath, variants[0] ?? ""));
    expect(media.status).toBe(200);
    const segment = await edgeRequest(
      edge,
      resolvePath(resolvePath(masterPath, variants[0] ?? ""), playlistUris(media.text)[0] ?? ""),
    );
    expect(segment.status).toBe(200);
  }, 60_000);

  it("serves a source's other audio tracks as audio renditions of the master, with the viewer's token", async () => {
    const dubbed = join(work, "dubbed.mkv");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=2"),
      ...lavfi("sine=frequency=440:duration=2", "sine=frequency=660:duration=2"),
      ...["-map", "0", "-map", "1", "-map", "2", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"],
      ...["-metadata:s:a:0", "language=eng", "-metadata:s:a:1", "language=spa", dubbed],
    ]);
    const dubbedId = (await createVideo(t, libraryId, { title: "Dubbed" })).id;
    expect((await uploadSource(t, libraryId, dubbedId, fileBytes(dubbed))).status).toBe(202);
    expect((await waitForStatus(t, libraryId, dubbedId, ["ready", "failed"])).status).toBe("ready");
    try {
      await setSecurity({ video_privacy: "private" });
      const issued = await t.request("POST", `${videoPath(libraryId, dubbedId)}/playback-token`);
      expect(issued.status, issued.text).toBe(201);
      const masterPath = pathOf(issued.body.data.manifest_url);
      const query = masterPath.slice(masterPath.indexOf("?") + 1);
      const master = await edgeRequest(edge, masterPath);
      expect(master.status).toBe(200);
      const spanish =
        /#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="audio",NAME="Spanish",LANGUAGE="es",.*URI="([^"]+)"/.exec(
          master.text,
        )?.[1];
      expect(spanish).toBe(`audio_2/index.m3u8?${query}`);
      const playlistPath = resolvePath(masterPath, spanish ?? "");
      const playlist = await edgeRequest(edge, playlistPath);
      expect(playlist.status).toBe(200);
      expect(playlist.headers["content-type"]).toBe("application/vnd.apple.mpegurl");
      const segmentPath = resolvePath(playlistPath, playlistUris(playlist.text)[0] ?? "");
      expect(segmentPath).toContain(`?${query}`);
      const segment = await edgeRequest(edge, segmentPath);
      expect(segment.status).toBe(200);
      expect(segment.headers["content-type"]).toBe("video/mp2t");
      expect((await edgeRequest(edge, segmentPath.split("?")[0] ?? "")).status).toBe(403);
    } finally {
      await openSecurity();
    }
  }, 60_000);

  it("plays a library under a changed CUMULO_MEDIA_DOMAIN, and under the name it was made with", async () => {
    // A second node on the same store, as after a restart with the new setting.
    const renamed = await startTestApp(
      { CUMULO_EDGE_PORT: "0", CUMULO_MEDIA_DOMAIN: "renamed.example", CUMULO_RATE_LIMIT: "100000/1m" },
      { store: t.store },
    );
    try {
      const video = await renamed.request("GET", videoPath(libraryId, videoId));
      const newName = `${libraryId}.renamed.example`;
      expect(video.body.data.manifest_url).toContain(`/${newName}/${videoId}/playlist.m3u8`);
      const renamedEdge = edgeUrlOf(renamed);
      for (const name of [newName, hostname()]) {
        const manifest = await edgeRequest(renamedEdge, `/${name}/${videoId}/playlist.m3u8`);
        expect(manifest.status, name).toBe(200);
        expect(manifest.text).toContain("#EXTM3U");
      }
      // Host-style too; a name under the domain that is no library's names nothing.
      expect((await edgeRequest(renamedEdge, `/${videoId}/playlist.m3u8`, { host: newName })).status).toBe(
        200,
      );
      const stranger = `${MISSING_ID}.renamed.example`;
      expect((await edgeRequest(renamedEdge, `/${stranger}/${videoId}/playlist.m3u8`)).status).toBe(404);
    } finally {
      await renamed.close();
    }
  });

  it("gives a truncated source the duration it plays for, not the one its header names", async () => {
    const whole = await generateClip(work, { seconds: 10, width: 320, height: 180 });
    const fronted = join(work, "fronted.mp4");
    await tools.ffmpeg(["-i", whole, "-c", "copy", "-movflags", "+faststart", fronted]);
    // The header (at the front) still describes 10 s; the data stops at about 4 s.
    const bytes = fileBytes(fronted);
    const cut = bytes.subarray(0, Math.floor(bytes.length * 0.4));
    const videoId = (await createVideo(t, libraryId, { title: "Cut short" })).id;
    expect((await uploadSource(t, libraryId, videoId, cut)).status).toBe(202);
    const video = await waitForStatus(t, libraryId, videoId, ["ready", "failed"]);
    expect(video.status).toBe("ready");
    expect(video.duration).toBeGreaterThanOrEqual(2);
    expect(video.duration).toBeLessThanOrEqual(6);
    const mp4 = await edgeRequest(edge, `/${hostname()}/${videoId}/play.mp4`);
    const file = join(work, "cut-play.mp4");
    writeFileSync(file, mp4.body);
    expect(Math.abs((await tools.probe(file)).durationS - video.duration)).toBeLessThanOrEqual(1);
  }, 60_000);

  it("serves the MP4 with Range, the thumbnail and the animated preview", async () => {
    const whole = await play("play.mp4");
    expect(whole.status).toBe(200);
    expect(whole.headers["accept-ranges"]).toBe("bytes");
    // Never kept by the edge, so always fresh from the media store.
    expect([whole.headers["x-cache"], whole.headers.age]).toEqual(["MISS", "0"]);
    // Never sniffed as another type (QA of 4 December, session 41).
    expect(whole.headers["x-content-type-options"]).toBe("nosniff");
    const file = join(work, "play.mp4");
    writeFileSync(file, whole.body);
    const probe = await tools.probe(file);
    expect(probe.durationS).toBeCloseTo(2.5, 0);

    const part = await play("play.mp4", { range: "bytes=100-199" });
    expect(part.status).toBe(206);
    expect(part.headers["content-range"]).toBe(`bytes 100-199/${whole.body.length}`);
    // A script player (fetch, XHR) may read them too (QA of 5 December, session 43).
    expect(part.headers["access-control-expose-headers"]).toBe(
      "Content-Range, Accept-Ranges, ETag, Last-Modified, Age, X-Cache",
    );
    expect(part.body).toEqual(whole.body.subarray(100, 200));
    const tail = await play("play.mp4", { range: `bytes=${whole.body.length}-` });
    expect(tail.status).toBe(416);
    expect(tail.headers["access-control-allow-origin"]).toBe("*");
    const again = await play("play.mp4", { "if-none-match": String(whole.headers.etag) });
    expect(again.status).toBe(304);

    const thumbnail = await play("thumbnail.jpg");
    expect(thumbnail.status).toBe(200);
    expect(thumbnail.body.subarray(0, 3)).toEqual(Buffer.from([0xff, 0xd8, 0xff]));
    const preview = await play("preview.webp");
    expect(preview.status).toBe(200);
    expect(preview.body.subarray(8, 12).toString()).toBe("WEBP");
  });

  it("counts the bytes of streamed files as CDN traffic", async () => {
    const traffic = async () => {
      await t.cumulo.services.cdnTraffic.flush();
      const analytics = await t.request(
        "GET",
        `/v1/cdn/analytics?metrics=traffic&granularity=1d&distribution=${hostname()}`,
      );
      expect(analytics.status, analytics.text).toBe(200);
      return analytics.body.Data.reduce(
        (sum: number, bucket: { traffic: number }) => sum + bucket.traffic,
        0,
      );
    };
    // The edge counts an answer once its response has closed, which the viewer does not wait for: the
    // figure is read again until earlier answers' counts have all arrived.
    let before = await traffic();
    for (let previous = -1; before !== previous; ) {
      previous = before;
      await new Promise((resolve) => setTimeout(resolve, 200));
      before = await traffic();
    }
    const whole = await play("play.mp4");
    const part = await play("play.mp4", { range: "bytes=100-199" });
    const thumbnail = await play("thumbnail.jpg");
    expect([whole.status, part.status, thumbnail.status]).toEqual([200, 206, 200]);
    const expected = before + whole.body.length + 100 + thumbnail.body.length;
    await vi.waitFor(async () => expect(await traffic()).toBe(expected), { timeout: 30_000, interval: 100 });
    // The media store is the origin of every answer: nothing came from a cache (only the bodies of
    // earlier refusals, a few bytes each, were sent without an origin read).
    const origin = await t.request(
      "GET",
      `/v1/cdn/analytics?metrics=cache_hit_traffic_ratio,upstream_origin_time_ms&granularity=1d&distribution=${hostname()}`,
    );
    const day = origin.body.Data.at(-1);
    expect(day.cache_hit_traffic_ratio).toBeLessThan(0.01);
    expect(day.upstream_origin_time_ms).toBeGreaterThan(0);
  });

  it("lists subtitles as WebVTT tracks in the master, converting SRT", async () => {
    const form = new FormData();
    form.set("title", "English");
    form.set("language", "en");
    form.set(
      "file",
      new Blob(["1\r\n00:00:00,500 --> 00:00:02,000\r\nHello <b>there</b>\r\n"], { type: "text/plain" }),
      "en.srt",
    );
    const created = await t.request("POST", `${videoPath(libraryId, videoId)}/subtitles`, { body: form });
    expect(created.status, created.text).toBe(201);
    const subtitleId = created.body.data.id;

    const masterPath = `/${hostname()}/${videoId}/playlist.m3u8`;
    const master = await edgeRequest(edge, masterPath);
    expect(master.text).toContain(
      `#EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="en",DEFAULT=YES,AUTOSELECT=YES,FORCED=NO,URI="subtitles/${subtitleId}.m3u8"`,
    );
    for (const line of master.text.split("\n").filter((l) => l.startsWith("#EXT-X-STREAM-INF")))
      expect(line).toContain('SUBTITLES="subs"');
    const playlistPath = resolvePath(masterPath, `subtitles/${subtitleId}.m3u8`);
    const playlist = await edgeRequest(edge, playlistPath);
    expect(playlist.status).toBe(200);
    expect(playlist.text).toContain("#EXT-X-ENDLIST");
    const vtt = await edgeRequest(edge, resolvePath(playlistPath, playlistUris(playlist.text)[0] ?? ""));
    expect(vtt.status).toBe(200);
    expect(vtt.headers["content-type"]).toBe("text/vtt; charset=utf-8");
    const map = /^WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:(\d+),LOCAL:00:00:00.000\n\n1\n/.exec(vtt.text);
    expect(vtt.text.slice(map?.[0].length)).toBe("00:00:00.500 --> 00:00:02.000\nHello <b>there</b>\n");
    // Cue time 0 is where the segments' first frame is (1.4 s and more in): before, with no map,
    // players showed every cue that much early.
    const variant = resolvePath(
      masterPath,
      playlistUris(master.text).find((uri) => uri.endsWith("p/index.m3u8")) ?? "",
    );
    const segment = await edgeRequest(
      edge,
      resolvePath(variant, playlistUris((await edgeRequest(edge, variant)).text)[0] ?? ""),
    );
    const file = join(work, "first-segment.ts");
    writeFileSync(file, segment.body);
    const probed = execFileSync(
      locateMediaTools().ffprobe,
      ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=start_time", "-of", "csv=p=0", file],
      { encoding: "utf8" },
    );
    const startS = Number(probed.trim().split("\n")[0]);
    expect(startS).toBeGreaterThan(1.4);
    expect(Number(map?.[1]) / 90_000).toBeCloseTo(startS, 4);

    // Converted once: the next viewer is answered without reading the file again (a 5 MiB SRT took
    // the event loop 0.3-0.6 s per request). Its file gone from the disk shows it.
    const subtitleDir = join(t.store.dataDir, "blobs", "media", libraryId, videoId, "subtitles");
    for (const file of readdirSync(subtitleDir)) rmSync(join(subtitleDir, file));
    const again = await edgeRequest(edge, resolvePath(playlistPath, playlistUris(playlist.text)[0] ?? ""));
    expect(again.status).toBe(200);
    expect(again.text).toBe(vtt.text);

    await t.request("DELETE", `${videoPath(libraryId, videoId)}/subtitles/${subtitleId}`);
    expect((await edgeRequest(edge, masterPath)).text).not.toContain("EXT-X-MEDIA");
  });

  it("answers a browser's CORS preflight for the library's files, and no other method but GET and HEAD", async () => {
    const preflight = await edgeRequest(edge, `/${hostname()}/${videoId}/playlist.m3u8`, {
      method: "OPTIONS",
      headers: {
        origin: "https://player.example",
        "access-control-request-method": "GET",
        "access-control-request-headers": "range, x-player-session",
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers).toMatchObject({
      "access-control-allow-origin": "*",
      "access-control-allow-methods": "GET, HEAD, OPTIONS",
      "access-control-allow-headers": "range, x-player-session",
      "access-control-max-age": "86400",
    });
    expect(preflight.body.length).toBe(0);
    // Only header names are given back.
    const odd = await edgeRequest(edge, `/${hostname()}/${videoId}/play.mp4`, {
      method: "OPTIONS",
      headers: { "access-control-request-headers": "range, a b" },
    });
    expect(odd.status).toBe(204);
    expect(odd.headers["access-control-allow-headers"]).toBeUndefined();
    const posted = await edgeRequest(edge, `/${hostname()}/${videoId}/play.mp4`, { method: "POST" });
    expect(posted.status).toBe(405);
    expect(posted.headers.allow).toBe("GET, HEAD, OPTIONS");
  });

  it("enforces referrer rules (allow, allow with an empty list, deny, disabled)", async () => {
    try {
      await setSecurity({ referrers: { action: "allow", values: ["good.example", "*.partner.example"] } });
      expect((await play("playlist.m3u8", { referer: "https://good.example/page" })).status).toBe(200);
      expect((await play("playlist.m3u8", { referer: "https://www.partner.example/" })).status).toBe(200);
      const refused = await play("playlist.m3u8", { referer: "https://bad.example/" });
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.text)).toMatchObject({ success: false, error: "forbidden" });
      expect(typeof JSON.parse(refused.text).message).toBe("string");
      // Readable by a web player on another origin, which can then say why.
      expect(refused.headers["access-control-allow-origin"]).toBe("*");
      expect((await play("playlist.m3u8")).status).toBe(403);

      await setSecurity({ referrers: { action: "allow", values: [] } });
      expect((await play("play.mp4", { range: "bytes=0-9" })).status).toBe(206);
      expect((await play("play.mp4", { referer: "https://good.example/" })).status).toBe(403);

      await setSecurity({ referrers: { action: "deny", values: ["bad.example"] } });
      expect((await play("thumbnail.jpg", { referer: "https://bad.example/x" })).status).toBe(403);
      expect((await play("thumbnail.jpg", { referer: "https://good.example/x" })).status).toBe(200);
      expect((await play("thumbnail.jpg")).status).toBe(200);

      await setSecurity({ referrers: { action: "deny", values: ["bad.example"], enabled: false } });
      expect((await play("thumbnail.jpg", { referer: "https://bad.example/x" })).status).toBe(200);
    } finally {
      await openSecurity();
    }
  });

  it("enforces country rules from CF-IPCountry or X-Viewer-Country, and counts refusals", async () => {
    try {
      await setSecurity({ countries: { action: "deny", values: ["DE"] } });
      expect((await play("preview.webp", { "cf-ipcountry": "DE" })).status).toBe(403);
      expect((await play("preview.webp", { "x-viewer-country": "de" })).status).toBe(403);
      expect((await play("preview.webp", { "x-viewer-country": "FR" })).status).toBe(200);
      expect((await play("preview.webp")).status).toBe(200);
      // An empty CF-IPCountry names no country: X-Viewer-Country (a proxy's) still decides.
      for (const empty of ["", " "]) {
        const named = await play("preview.webp", { "cf-ipcountry": empty, "x-viewer-country": "DE" });
        expect(named.status).toBe(403);
      }
      // Several values (a proxy that adds its line after the viewer's own, which Node joins as
      // "FR, DE"): the last one, the nearest proxy's, is the country.
      expect((await play("preview.webp", { "cf-ipcountry": "FR, DE" })).status).toBe(403);
      expect((await play("preview.webp", { "cf-ipcountry": "DE,FR" })).status).toBe(200);
      expect((await play("preview.webp", { "x-viewer-country": "FR, DE" })).status).toBe(403);

      await setSecurity({ countries: { action: "allow", values: ["FR"] } });
      expect((await play("preview.webp", { "cf-ipcountry": "FR" })).status).toBe(200);
      expect((await play("preview.webp", { "cf-ipcountry": "US" })).status).toBe(403);
      expect((await play("preview.webp")).status).toBe(403);
    } finally {
      await openSecurity();
    }
    await t.cumulo.services.cdnTraffic.flush();
    const analytics = await t.request(
      "GET",
      `/v1/cdn/analytics?metrics=responses_4xx,requests&granularity=1d&distribution=${hostname()}`,
    );
    expect(analytics.status, analytics.text).toBe(200);
    const total = (metric: string) =>
      analytics.body.Data.reduce(
        (sum: number, bucket: Record<string, number>) => sum + (bucket[metric] ?? 0),
        0,
      );
    expect(total("responses_4xx")).toBeGreaterThanOrEqual(4);
  });

  it("reads dot segments in a media path as the path they resolve to, with its access rules", async () => {
    // The edge normalizes the path (RFC 3986) before the rules: a spelling reaches the video's file
    // and nothing else, and is refused whenever the plain path would be.
    const direct = await play("play.mp4", { range: "bytes=0-9" });
    expect(direct.status).toBe(206);
    const spellings = [
      "x/../play.mp4",
      "./play.mp4",
      "x/%2e%2e/play.mp4",
      `../${videoId}/play.mp4`,
      "%70lay.mp4",
    ];
    for (const spelling of spellings) {
      const dotted = await play(spelling, { range: "bytes=0-9" });
      expect(dotted.status, spelling).toBe(206);
      expect(dotted.body.equals(direct.body), spelling).toBe(true);
    }
    try {
      await setSecurity({ countries: { action: "deny", values: ["DE"] } });
      expect((await play("x/../play.mp4", { "cf-ipcountry": "DE" })).status).toBe(403);
      await setSecurity({
        countries: { action: "deny", values: [], enabled: false },
        video_privacy: "private",
      });
      expect((await play("x/../playlist.m3u8")).status).toBe(403);
    } finally {
      await openSecurity();
    }
    // Never above the library's own root: another library's host or the data dir are not reached.
    expect((await play("../../etc/passwd")).status).toBe(404);
    // An escaped `/` stays one (a reserved character keeps its meaning): no file has that name.
    const escapedSlash = await edgeRequest(edge, `/${hostname()}/${videoId}%2Fplay.mp4`);
    expect(escapedSlash.status).toBe(404);
  });

  it("refuses its files to another distribution's edge: a country rule is not passed by naming the edge as an origin", async () => {
    // Another organization's distribution whose origin is this edge: its origin requests carry
    // neither the viewer's country nor address, so a denied country passed the library's rule.
    const other = await t.createOrganization("Relay");
    const relay = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname: "relay.example.com", origin_url: `${edge}/` },
      key: other.key,
    });
    expect(relay.status, relay.text).toBe(201);
    const fromGermany = { "cf-ipcountry": "DE" };
    const relayed = (headers: Record<string, string> = {}) =>
      edgeRequest(edge, `/relay.example.com/${hostname()}/${videoId}/play.mp4`, { headers });
    try {
      await setSecurity({ countries: { action: "deny", values: ["DE"] } });
      expect((await play("play.mp4", fromGermany)).status).toBe(403);
      const refused = await relayed(fromGermany);
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.text)).toEqual({
        success: false,
        error: "forbidden",
        message: THROUGH_ANOTHER_DISTRIBUTION,
      });
      await openSecurity();
      expect((await relayed()).status).toBe(403);
      expect((await play("play.mp4")).status).toBe(200);
    } finally {
      await openSecurity();
    }
  });

  it("plays a private video only with a valid, unexpired token, carried into listed URIs", async () => {
    try {
      await setSecurity({ video_privacy: "private" });
      const missing = await play("playlist.m3u8");
      expect(missing.status).toBe(403);
      expect(JSON.parse(missing.text).error).toBe("forbidden");

      const issued = await t.request("POST", `${videoPath(libraryId, videoId)}/playback-token`, {
        json: { expires_in_s: 600 },
      });
      expect(issued.status, issued.text).toBe(201);
      const { token, expires, manifest_url, direct_play_url } = issued.body.data;
      expect(expires).toBeGreaterThan(Date.now() / 1000 + 590);
      const query = `token=${encodeURIComponent(token)}&expires=${expires}`;
      expect(manifest_url).toBe(`${ready.manifest_url}?${query}`);
      expect(direct_play_url).toBe(`${ready.direct_play_url}?${query}`);

      const masterPath = pathOf(manifest_url);
      const master = await edgeRequest(edge, masterPath);
      expect(master.status).toBe(200);
      const variants = playlistUris(master.text);
      for (const uri of variants) expect(uri).toContain(`?${query}`);
      const mediaPath = resolvePath(masterPath, variants[0] ?? "");
      const media = await edgeRequest(edge, mediaPath);
      expect(media.status).toBe(200);
      const segmentPath = resolvePath(mediaPath, playlistUris(media.text)[0] ?? "");
      expect(segmentPath).toContain(`?${query}`);
      expect((await edgeRequest(edge, segmentPath)).status).toBe(200);
      expect((await edgeRequest(edge, segmentPath.split("?")[0] ?? "")).status).toBe(403);
      expect(
        (await edgeRequest(edge, pathOf(direct_play_url), { headers: { range: "bytes=0-9" } })).status,
      ).toBe(206);

      const wrong = await play(`playlist.m3u8?token=${token.slice(0, -2)}xx&expires=${expires}`);
      expect(wrong.status).toBe(403);
      // The expiry is signed: a token cannot be stretched, nor a bad first copy hidden by a good one.
      expect((await play(`playlist.m3u8?token=${token}&expires=${expires + 1}`)).status).toBe(403);
      expect((await play(`playlist.m3u8?token=x&${query}`)).status).toBe(403);
      const otherVideo = (await createVideo(t, libraryId)).id;
      const elsewhere = await edgeRequest(edge, `/${hostname()}/${otherVideo}/playlist.m3u8?${query}`);
      expect(elsewhere.status).toBe(403);
      const past = Math.floor(Date.now() / 1000) - 5;
      const expired = await play(
        `playlist.m3u8?token=${t.cumulo.services.video.tokens.sign(videoId, past)}&expires=${past}`,
      );
      expect(expired.status).toBe(403);
      expect(JSON.parse(expired.text).message).toMatch(/expired/);

      const tooLong = await t.request("POST", `${videoPath(libraryId, videoId)}/playback-token`, {
        json: { expires_in_s: 86_401 },
      });
      expect(tooLong.status).toBe(400);
      expect(tooLong.body.errors[0]).toMatchObject({ field: "expires_in_s", code: "validation_max" });
      const byDefault = await t.request("POST", `${videoPath(libraryId, videoId)}/playback-token`);
      expect(byDefault.status, byDefault.text).toBe(201);
      expect(byDefault.body.data.expires).toBeGreaterThan(Date.now() / 1000 + 3590);
    } finally {
      await openSecurity();
    }
  });

  it("serves an embed page with the player's theme and the player script from Cumulo itself", async () => {
    const player = await t.request("POST", `/v1/media/libraries/${libraryId}/players`, {
      json: { name: "Red", theme: { primary_color: "#ff0000", loop: true, controls: ["play", "progress"] } },
    });
    expect(player.status, player.text).toBe(201);
    const page = await fetch(`${t.baseUrl}/embed/${libraryId}/${videoId}?player=${player.body.data.id}`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    const html = await page.text();
    expect(html).toContain(ready.manifest_url);
    expect(html).toContain('src="/embed/assets/hls.min.js"');
    expect(html).toContain("accent-color: #ff0000");
    expect(html).toMatch(/<video id="cumulo-video" controls [^>]*loop/);
    expect(html).toContain("<title>Test &lt;clip&gt;</title>");
    const script = await fetch(`${t.baseUrl}/embed/assets/hls.min.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toContain("javascript");
    expect((await script.text()).length).toBeGreaterThan(100_000);

    expect((await fetch(`${t.baseUrl}/embed/${libraryId}/${crypto.randomUUID()}`)).status).toBe(404);
    try {
      await setSecurity({ video_privacy: "private" });
      const refused = await fetch(`${t.baseUrl}/embed/${libraryId}/${videoId}`);
      expect(refused.status).toBe(403);
      expect(await refused.json()).toMatchObject({ success: false, error: "forbidden" });
      const { token, expires } = (
        await t.request("POST", `${videoPath(libraryId, videoId)}/playback-token`, { json: {} })
      ).body.data;
      const allowed = await fetch(
        `${t.baseUrl}/embed/${libraryId}/${videoId}?token=${token}&expires=${expires}`,
      );
      expect(allowed.status).toBe(200);
      expect(await allowed.text()).toContain(`playlist.m3u8?token=${token}`);
    } finally {
      await openSecurity();
    }
  });

  it("ends corrupt input as failed with a reason and a failed event; a new upload replaces it", async () => {
    const broken = (await createVideo(t, libraryId, { title: "Broken" })).id;
    const garbage = new Uint8Array(
      Buffer.concat([Buffer.from("\x00\x00\x00\x18ftypmp42"), Buffer.alloc(8192, 7)]),
    );
    expect((await uploadSource(t, libraryId, broken, garbage, "application/octet-stream")).status).toBe(202);
    const failed = await waitForStatus(t, libraryId, broken, ["failed", "ready"]);
    expect(failed.status).toBe("failed");
    const state = await t.request("GET", `${videoPath(libraryId, broken)}/processing`);
    expect(state.body.data).toMatchObject({ status: "failed", uploads: 1, source_bytes: garbage.length });
    expect(state.body.data.failure_reason).toMatch(/ffprobe|video/);
    // ffmpeg names its input by path: the reason does not show where the server keeps its files.
    expect(state.body.data.failure_reason).not.toContain(t.config.dataDir);
    expect(state.body.data.failure_reason).not.toContain("video-work");
    await waitUntil(() =>
      receiver.received.some((entry) => {
        const body = JSON.parse(entry.body);
        return (
          body.event === "failed" && body.payload.video_id === broken && body.payload.status === "failed"
        );
      }),
    );
    expect((await edgeRequest(edge, `/${hostname()}/${broken}/playlist.m3u8`)).status).toBe(404);

    // A second upload (multipart this time) replaces the broken source and is processed from scratch.
    const form = new FormData();
    form.set("file", new Blob([fileBytes(clip)], { type: "video/mp4" }), "clip.mp4");
    const again = await t.request("PUT", `${videoPath(libraryId, broken)}/source`, { body: form });
    expect(again.status, again.text).toBe(202);
    expect(again.body.data.status).toBe("uploading");
    const fixed = await waitForStatus(t, libraryId, broken, ["ready", "failed"]);
    expect(fixed.status).toBe("ready");
    const replaced = await t.request("GET", `${videoPath(libraryId, broken)}/processing`);
    expect(replaced.body.data).toMatchObject({ status: "ready", failure_reason: null, uploads: 2 });
    expect(replaced.body.data.source_bytes).toBe(fileBytes(clip).length);
    expect((await edgeRequest(edge, `/${hostname()}/${broken}/playlist.m3u8`)).status).toBe(200);
    const sources = readdirSync(join(t.store.dataDir, "blobs", "media", libraryId, broken, "source"));
    expect(sources).toHaveLength(1);
    expect(readdirSync(join(t.store.dataDir, "blobs", "media", libraryId, broken, "renditions"))).toEqual([
      "2",
    ]);

    // Deleting the video removes every file under its prefix.
    expect((await t.request("DELETE", videoPath(libraryId, broken))).status).toBe(200);
    expect(existsSync(join(t.store.dataDir, "blobs", "media", libraryId, broken))).toBe(false);
  });

  it("fails a source that names other files (an HLS playlist): another organization's video is never read into it", async () => {
    // The playlist names a segment of this suite's video by its path on the server's disk (a
    // private video's files are no different); ffmpeg, left to guess the format, followed it.
    const rendition = join(t.store.dataDir, "blobs", "media", libraryId, videoId, "renditions", "1");
    const rung = readdirSync(rendition).find((name) => /^\d+p$/.test(name)) ?? "";
    const segment = join(rendition, rung, "segment_000.ts");
    expect(existsSync(segment)).toBe(true);
    const playlist = `#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:2.5,\n${segment}\n#EXT-X-ENDLIST\n`;

    const thief = await t.createOrganization("Thief");
    const asThief = { key: thief.key };
    const thiefLibrary = (await createLibrary(t, { name: "Loot", default_privacy: "public" }, thief.key)).id;
    const created = await t.request("POST", `/v1/media/libraries/${thiefLibrary}/videos`, {
      json: { title: "Loot" },
      ...asThief,
    });
    expect(created.status, created.text).toBe(201);
    const loot = created.body.data.id;
    const upload = await uploadSource(
      t,
      thiefLibrary,
      loot,
      new TextEncoder().encode(playlist),
      "video/mp4",
      thief.key,
    );
    expect(upload.status, upload.text).toBe(202);
    const ended = await waitUntil(async () => {
      const video = await t.request("GET", videoPath(thiefLibrary, loot), asThief);
      return ["ready", "failed"].includes(video.body.data.status) ? video.body.data : undefined;
    });
    expect(ended.status).toBe("failed");
    const state = await t.request("GET", `${videoPath(thiefLibrary, loot)}/processing`, asThief);
    expect(state.body.data.failure_reason).toMatch(/read as hls, not a format video sources are read from/);
    expect(state.body.data.failure_reason).not.toContain(t.config.dataDir);
    expect((await edgeRequest(edge, `/${thiefLibrary}.media.cumulo.local/${loot}/play.mp4`)).status).toBe(
      404,
    );
  });

  it("rejects other content types (415), empty files (400 naming the file), oversize bodies (413) and other tenants (404)", async () => {
    const target = (await createVideo(t, libraryId, { title: "Refusals" })).id;
    const text = await uploadSource(t, libraryId, target, new TextEncoder().encode("hello"), "text/plain");
    expect(text.status).toBe(415);
    expect(text.body).toEqual({ success: false, message: "Unsupported Media Type" });
    expect((await uploadSource(t, libraryId, target, new Uint8Array([1, 2]), "image/png")).status).toBe(415);
    const json = await t.request("PUT", `${videoPath(libraryId, target)}/source`, { json: { file: "x" } });
    expect(json.status).toBe(415);
    // An empty file, raw or in a form, is named: the same answer as a form field sent empty.
    const emptyFile = {
      success: false,
      message: "Invalid Request",
      errors: [{ field: "file", code: "validation_min", message: "The file field must not be empty." }],
    };
    const empty = await uploadSource(t, libraryId, target, new Uint8Array(0));
    expect(empty.status).toBe(400);
    expect(empty.body).toEqual(emptyFile);
    const form = new FormData();
    form.append("file", new Blob([]), "empty.mp4");
    const emptyPart = await t.request("PUT", `${videoPath(libraryId, target)}/source`, { body: form });
    expect(emptyPart.status).toBe(400);
    expect(emptyPart.body).toEqual(emptyFile);
    const big = await uploadSource(t, libraryId, target, new Uint8Array(MAX_VIDEO_BYTES + 1));
    expect(big.status).toBe(413);
    expect(big.body).toEqual({ success: false, message: "Payload Too Large" });
    // Chunked (no Content-Length): the limit is enforced while streaming.
    const chunks = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 6; i++) controller.enqueue(new Uint8Array(1024 * 1024));
        controller.close();
      },
    });
    const streamed = await fetch(`${t.baseUrl}${videoPath(libraryId, target)}/source`, {
      method: "PUT",
      headers: { authorization: `Bearer ${t.adminKey}`, "content-type": "video/mp4" },
      body: chunks,
      duplex: "half",
    } as RequestInit);
    expect(streamed.status).toBe(413);
    const after = await t.request("GET", videoPath(libraryId, target));
    expect(after.body.data.status).toBe("created");

    const missing = await uploadSource(t, libraryId, crypto.randomUUID(), fileBytes(clip));
    expect(missing.status).toBe(404);
  });
});
