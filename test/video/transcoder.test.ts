import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  failureReason,
  lengthOf,
  locateMediaTools,
  MAX_SOUND_START_S,
  MediaToolError,
  MediaTools,
  PacketTimeline,
  type ProbeJson,
  type ProbeReading,
  type ProbeStream,
  ScratchDiskError,
  SOURCE_READING,
  soundPastPictureS,
  timelineOfHeader,
} from "../../src/video/media-tools.ts";
import {
  highProfileCodec,
  ladderFor,
  levelFor,
  MASTER_PLAYLIST,
  MP4_FILE,
  masterPlaylist,
  PREVIEW_FILE,
  Transcoder,
  thumbnailSelection,
} from "../../src/video/transcoder.ts";
import { generateClip, lavfi, probeStreams, testMediaTools } from "../support/media.ts";
import { testStoreKind } from "../support/store.ts";

/** The length a media playlist states: its segments' `#EXTINF` seconds added up. */
const statedLength = (playlist: string): number =>
  [...playlist.matchAll(/#EXTINF:([\d.]+)/g)].reduce((sum, match) => sum + Number(match[1]), 0);

// The pipeline does not touch the store, so it runs once, with the SQLite pass.
describe.runIf(testStoreKind() === "sqlite")("video transcoder", () => {
  let work: string;
  let clip: string;
  const tools = testMediaTools();
  const transcoder = new Transcoder(tools);

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cumulo-video-"));
    clip = await generateClip(work);
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it("caps the ladder at the source height", () => {
    expect(ladderFor(1080).map((rung) => rung.size)).toEqual([1080, 720, 480, 360, 240]);
    expect(ladderFor(400).map((rung) => rung.size)).toEqual([360, 240]);
    expect(ladderFor(144).map((rung) => rung.size)).toEqual([144]);
    expect(highProfileCodec(31)).toBe("avc1.64001f");
    expect(highProfileCodec(40)).toBe("avc1.640028");
  });

  it("probes duration, size and audio", async () => {
    const probe = await transcoder.probe(clip);
    expect(probe.durationS).toBeCloseTo(2.5, 0);
    expect(probe).toMatchObject({ width: 640, height: 360, videoCodec: "h264" });
    expect(probe.audioTracks).toEqual([{ stream: 1, language: undefined, name: "Audio 1" }]);
  });

  it("produces playable HLS renditions, an MP4, thumbnails and an animated preview", async () => {
    const out = join(work, "out");
    const probe = await transcoder.probe(clip);
    const { renditions, audio, thumbnails } = await transcoder.transcode(clip, out, probe, 3);
    expect(renditions.map((rendition) => rendition.height)).toEqual([360, 240]);
    await transcoder.package(out, renditions, audio);

    const master = readFileSync(join(out, MASTER_PLAYLIST), "utf8");
    expect(master.startsWith("#EXTM3U")).toBe(true);
    const variants = [...master.matchAll(/#EXT-X-STREAM-INF:([^\n]+)\n([^\n]+)/g)];
    expect(variants.map((variant) => variant[2])).toEqual(["360p/index.m3u8", "240p/index.m3u8"]);
    for (const variant of variants) {
      expect(variant[1]).toMatch(/BANDWIDTH=\d+/);
      expect(variant[1]).toMatch(/RESOLUTION=\d+x(360|240)/);
      expect(variant[1]).toContain('CODECS="avc1.6400');
      expect(variant[1]).toContain("mp4a.40.2");
      const media = readFileSync(join(out, variant[2] ?? ""), "utf8");
      // Written as a growing EVENT playlist during the encode, complete (VOD) afterwards.
      expect(media).toContain("#EXT-X-PLAYLIST-TYPE:VOD");
      expect(media).toContain("#EXT-X-ENDLIST");
      const segments = media.split("\n").filter((line) => line.endsWith(".ts"));
      expect(segments.length).toBeGreaterThan(0);
      // Decoding the first segment proves it is playable (ffprobe is not used: some static builds crash on MPEG-TS).
      const segmentPath = join(out, (variant[2] ?? "").replace("index.m3u8", ""), segments[0] ?? "");
      expect(readFileSync(segmentPath)[0]).toBe(0x47);
      await tools.ffmpeg(["-i", segmentPath, "-f", "null", "-"]);
    }

    const mp4 = await tools.probe(join(out, MP4_FILE));
    expect(mp4.durationS).toBeCloseTo(2.5, 0);
    expect(mp4.height).toBe(360);
    expect(thumbnails).toHaveLength(3);
    for (const thumbnail of thumbnails)
      expect(readFileSync(join(out, thumbnail)).subarray(0, 3)).toEqual(Buffer.from([0xff, 0xd8, 0xff]));
    // Three different moments of the moving test pattern, not one frame repeated.
    expect(
      new Set(thumbnails.map((thumbnail) => readFileSync(join(out, thumbnail)).toString("base64"))).size,
    ).toBe(3);
    const preview = readFileSync(join(out, PREVIEW_FILE));
    expect(preview.subarray(0, 4).toString()).toBe("RIFF");
    expect(preview.subarray(8, 12).toString()).toBe("WEBP");
    expect((await readdir(out)).sort()).toEqual(
      ["240p", "360p", MASTER_PLAYLIST, MP4_FILE, PREVIEW_FILE, "thumbnails"].sort(),
    );
  }, 120_000);

  it("makes the MP4 from the top rung's encoded stream, not a second encode", async () => {
    const out = join(work, "reuse");
    const probe = await transcoder.probe(clip);
    const { renditions, audio } = await transcoder.transcode(clip, out, probe, 2);
    await transcoder.package(out, renditions, audio);
    expect(readFileSync(join(out, MASTER_PLAYLIST), "utf8").match(/^\d+p\/index\.m3u8$/gm)).toEqual([
      "360p/index.m3u8",
      "240p/index.m3u8",
    ]);
    // The decoded pictures of a copied stream are identical; any re-encode (lossy) would change them.
    const pictureHashes = async (input: string, name: string) => {
      const file = join(out, name);
      await tools.ffmpeg(["-i", input, "-map", "0:v", "-f", "framemd5", file]);
      return readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => line && !line.startsWith("#"))
        .map((line) => line.split(",").pop()?.trim());
    };
    const mp4 = await pictureHashes(join(out, MP4_FILE), "mp4.md5");
    const topRung = await pictureHashes(join(out, "360p", "index.m3u8"), "rung.md5");
    expect(mp4.length).toBeGreaterThan(50);
    expect(mp4).toEqual(topRung);
    const header = readFileSync(join(out, MP4_FILE));
    // `+faststart`: the index (moov) comes before the media data (mdat).
    expect(header.indexOf("moov")).toBeLessThan(header.indexOf("mdat"));
  }, 120_000);

  it("selects the first frame at or after the middle of each slice for the thumbnails", () => {
    expect(thumbnailSelection(10, 2)).toBe(
      "gte(t,2.500)*not(gte(prev_t,2.500))+gte(t,7.500)*not(gte(prev_t,7.500))",
    );
  });

  it("gives a single-frame video its thumbnails and a preview", async () => {
    const still = join(work, "still.mp4");
    await tools.ffmpeg([
      "-f",
      "lavfi",
      "-i",
      "testsrc=size=320x240:rate=25",
      "-frames:v",
      "1",
      "-pix_fmt",
      "yuv420p",
      still,
    ]);
    const probe = await transcoder.probe(still);
    const out = join(work, "still");
    const { thumbnails, renditions } = await transcoder.transcode(still, out, probe, 2);
    expect(thumbnails).toEqual(["thumbnails/thumbnail_001.jpg", "thumbnails/thumbnail_002.jpg"]);
    // A segment under 0.1 s is measured as 0.1 s for the peak: the average may not pass it (RFC
    // 8216 4.3.4.2), as it did for a clip of one frame (QA of 6 December).
    for (const rendition of renditions)
      expect(rendition.averageBandwidth).toBeLessThanOrEqual(rendition.bandwidth);
    for (const thumbnail of thumbnails)
      expect(readFileSync(join(out, thumbnail)).subarray(0, 3)).toEqual(Buffer.from([0xff, 0xd8, 0xff]));
    // Shorter than one preview frame (a tenth of a second): the preview was an 8-byte file with no
    // picture in it, served as a WebP (QA of 4 December).
    const preview = readFileSync(join(out, PREVIEW_FILE));
    expect(preview.subarray(0, 4).toString("latin1")).toBe("RIFF");
    expect(preview.subarray(8, 12).toString("latin1")).toBe("WEBP");
    expect(preview.length).toBeGreaterThan(100);
  }, 60_000);

  it("handles a source without audio", async () => {
    const silent = await generateClip(work, { audio: false, width: 320, height: 240, seconds: 1.5 });
    const probe = await transcoder.probe(silent);
    expect(probe.audioTracks).toEqual([]);
    const out = join(work, "silent");
    const { renditions, audio } = await transcoder.transcode(silent, out, probe, 1);
    await transcoder.package(out, renditions, audio);
    expect(readFileSync(join(out, MASTER_PLAYLIST), "utf8")).not.toContain("mp4a");
  }, 60_000);

  it("sizes renditions by the picture as shown: rotated and anamorphic sources", async () => {
    // A phone's portrait video: stored 640x360 with a rotation of 90 degrees.
    const rotated = join(work, "rotated.mp4");
    await tools.ffmpeg(["-i", clip, "-c", "copy", "-metadata:s:v:0", "rotate=90", rotated]);
    const probe = await transcoder.probe(rotated);
    expect(probe).toMatchObject({ width: 360, height: 640 });
    const out = join(work, "rotated");
    const { renditions, thumbnails } = await transcoder.transcode(rotated, out, probe, 1);
    // Rungs are named by the short side, as video platforms name them: a portrait 360p is 360x640
    // (before the QA of session 48, sized by the height: the best rung of a 1080x1920 phone video was 608x1080).
    expect(renditions.map((rendition) => `${rendition.width}x${rendition.height}`)).toEqual([
      "360x640",
      "240x426",
    ]);
    expect(renditions.map((rendition) => rendition.playlist)).toEqual(["360p/index.m3u8", "240p/index.m3u8"]);
    for (const rendition of renditions) {
      const stream = await tools.probe(join(out, rendition.playlist.replace("index.m3u8", "segment_000.ts")));
      expect([stream.width, stream.height]).toEqual([rendition.width, rendition.height]);
    }
    const thumbnail = await tools.probe(join(out, thumbnails[0] ?? ""));
    expect(thumbnail.height).toBeGreaterThan(thumbnail.width);

    // DVD-style PAL widescreen: 720x576 pixels shown 16:9 wide.
    const anamorphic = join(work, "anamorphic.mp4");
    await tools.ffmpeg([
      "-f",
      "lavfi",
      "-i",
      "testsrc=size=720x576:rate=25:duration=1",
      "-vf",
      "setsar=64/45",
      "-c:v",
      "libx264",
      "-preset",
      "ultrafast",
      anamorphic,
    ]);
    expect(await transcoder.probe(anamorphic)).toMatchObject({ width: 1024, height: 576 });
  }, 60_000);

  it("scales a source smaller than 240p down to even sizes, never up", async () => {
    const tiny = join(work, "tiny.mp4");
    await tools.ffmpeg([
      ...["-f", "lavfi", "-i", "testsrc=size=102x58:rate=25:duration=1", "-vf", "scale=101:57"],
      ...["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv444p", tiny],
    ]);
    const out = join(work, "tiny");
    const { renditions } = await transcoder.transcode(tiny, out, await transcoder.probe(tiny), 1);
    // Shown about 100x57 (the scale kept the shape in its pixels' ratio); 102x58 before the QA of
    // session 48: rounded up to even.
    expect(renditions.map((rendition) => `${rendition.width}x${rendition.height}`)).toEqual(["98x56"]);
    expect(await tools.probe(join(out, MP4_FILE))).toMatchObject({ width: 98, height: 56 });
  }, 60_000);

  it("processes a browser recording, whose header has no length and whose rate is a clock's 1000/1", async () => {
    // Chromium's MediaRecorder (test/fixtures/media/README.md): VP8 and Opus, about 25 fps, 2.6 s.
    const recording = join(import.meta.dirname, "..", "fixtures", "media", "browser-recording.webm");
    const probe = await transcoder.probe(recording);
    expect(probe.durationS).toBeGreaterThan(2.3);
    expect(probe.durationS).toBeLessThan(2.9);
    // Conformed to 30 fps: its average (about 25) would drop most of a screen recording's bursts.
    expect([probe.frameRate, probe.renditionRate]).toEqual([30, "30"]);
    const out = join(work, "recording");
    const { renditions } = await transcoder.transcode(recording, out, probe, 2);
    // Before the QA of session 48: "the video has no duration"; once given one, 1000 frames a second.
    const [{ nb_read_frames: frames }] = probeStreams(join(out, "90p", "segment_000.ts"), "nb_read_frames", [
      "-select_streams",
      "v:0",
      "-count_frames",
    ]);
    expect(Number(frames)).toBeGreaterThan(60);
    expect(Number(frames)).toBeLessThan(90);
    expect(renditions[0]?.codecs).toBe(highProfileCodec(levelFor(160, 90, probe.frameRate)));
  }, 60_000);

  it("plays a source past 60 fps at half its rate or less, and declares the level of the rate encoded", async () => {
    const fast = await generateClip(work, { width: 320, height: 180, rate: 120, seconds: 1, audio: false });
    const probe = await transcoder.probe(fast);
    expect([probe.frameRate, probe.renditionRate]).toEqual([60, "120/2"]);
    const out = join(work, "fast");
    await transcoder.transcode(fast, out, probe, 1);
    const [{ r_frame_rate: rate }] = probeStreams(join(out, MP4_FILE), "r_frame_rate", [
      "-select_streams",
      "v:0",
    ]);
    expect(rate).toBe("60/1");
    // A variable rate on a real base of at most 60 (10, 30 and 60 fps stretches) is encoded at that
    // base, and its level is the base's: the average (about 33) had declared 3.0 for 360p60.
    const variable = join(work, "variable.mp4");
    await tools.ffmpeg([
      ...[10, 30, 60].flatMap((r) => ["-f", "lavfi", "-i", `testsrc=size=640x360:rate=${r}:duration=1`]),
      ...[
        "-filter_complex",
        "[0:v]settb=1/90000[a];[1:v]settb=1/90000[b];[2:v]settb=1/90000[c];[a][b][c]concat=n=3:v=1:a=0[v]",
      ],
      ...[
        "-map",
        "[v]",
        "-fps_mode",
        "vfr",
        "-video_track_timescale",
        "90000",
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        variable,
      ],
    ]);
    const varied = await transcoder.probe(variable);
    expect([varied.frameRate, varied.renditionRate]).toEqual([60, undefined]);
    expect(levelFor(640, 360, varied.frameRate)).toBe(31);
  }, 60_000);

  it("carries the audio track marked default, not merely the first", async () => {
    const tracks = join(work, "two-tracks.mp4");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=1"),
      ...lavfi("sine=frequency=440:duration=1,volume=-40dB"),
      ...lavfi("sine=frequency=880:duration=1"),
      ...["-map", "0", "-map", "1", "-map", "2", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"],
      ...["-disposition:a:0", "0", "-disposition:a:1", "default", tracks],
    ]);
    const probe = await transcoder.probe(tracks);
    expect(probe.audioTracks[0]?.stream).toBe(2);
    const out = join(work, "two-tracks");
    await transcoder.transcode(tracks, out, probe, 1);
    const loudness = spawnSync(
      locateMediaTools().ffmpeg,
      ["-v", "info", "-i", join(out, MP4_FILE), "-af", "volumedetect", "-f", "null", "-"],
      { encoding: "utf8" },
    ).stderr;
    // The quiet first track would read about -43 dB.
    expect(Number(/mean_volume: (-?[\d.]+) dB/.exec(loudness)?.[1])).toBeGreaterThan(-30);
  }, 60_000);

  it("processes a raw H.264 or HEVC stream, which has no container and no times, at its frames' durations", async () => {
    for (const [encoder, name] of [
      ["libx264", "raw-h264"],
      ["libx265", "raw-hevc"],
    ] as const) {
      // Named as an upload is stored, without an extension: ffprobe tells the format by the content.
      const raw = join(work, name);
      await tools.ffmpeg([
        ...["-f", "lavfi", "-i", "testsrc=size=320x180:rate=30:duration=3", "-pix_fmt", "yuv420p"],
        ...["-c:v", encoder, "-preset", "ultrafast", "-f", encoder === "libx264" ? "h264" : "hevc", raw],
      ]);
      const probe = await transcoder.probe(raw);
      expect(probe.durationS).toBeCloseTo(3, 2);
      expect(probe.frameRate).toBe(30);
      const out = join(work, `${name}-out`);
      await transcoder.transcode(raw, out, probe, 2);
      const [{ duration }] = probeStreams(join(out, MP4_FILE), "duration", ["-select_streams", "v:0"]);
      expect(Number(duration)).toBeCloseTo(3, 1);
    }
  }, 60_000);

  it("deinterlaces an interlaced source, whose renditions were combed", async () => {
    // 50 moments a second woven into 25 frames of two fields, coded interlaced (as a 480i camcorder's),
    // at the 480p rung's own size so that no scaling blends the fields away from the detector.
    const woven = join(work, "interlaced.mp4");
    await tools.ffmpeg([
      ...lavfi("testsrc2=size=854x480:rate=50:duration=2"),
      ...["-vf", "tinterlace=mode=interleave_top,setfield=tff", "-c:v", "libx264", "-preset", "ultrafast"],
      ...["-x264-params", "tff=1", "-flags", "+ilme+ildct", "-pix_fmt", "yuv420p", woven],
    ]);
    const probe = await transcoder.probe(woven);
    expect(probe.interlaced).toBe(true);
    expect((await transcoder.probe(clip)).interlaced).toBe(false);
    const out = join(work, "interlaced");
    await transcoder.transcode(woven, out, probe, 1);
    const detected = spawnSync(
      locateMediaTools().ffmpeg,
      ["-v", "info", "-i", join(out, MP4_FILE), "-vf", "idet", "-an", "-f", "null", "-"],
      { encoding: "utf8" },
    ).stderr;
    const [, topFirst, bottomFirst, progressive] =
      /Multi frame detection: TFF: *(\d+) BFF: *(\d+) Progressive: *(\d+)/.exec(detected)?.map(Number) ?? [];
    // Not deinterlaced, every frame reads as top field first (50 of 50).
    expect(progressive).toBeGreaterThanOrEqual(40);
    expect((topFirst ?? 50) + (bottomFirst ?? 50)).toBeLessThanOrEqual(10);
  }, 60_000);

  it("offers every audio track: the default in the rungs, the others as audio renditions on the rungs' timeline", async () => {
    const tracks = join(work, "three-tracks.mkv");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=320x180:rate=25:duration=3"),
      // Told apart by loudness (mean volumes of about -31, -61 and -46 dB): the default loudest.
      ...lavfi("sine=frequency=440:duration=3,volume=-40dB"),
      ...lavfi("sine=frequency=440:duration=3,volume=-10dB"),
      // The commentary runs 6 s past the video.
      ...lavfi("sine=frequency=440:duration=9,volume=-25dB"),
      ...["-map", "0", "-map", "1", "-map", "2", "-map", "3", "-c:v", "libx264", "-preset", "ultrafast"],
      ...["-c:a", "aac", "-metadata:s:a:0", "language=fre", "-metadata:s:a:1", "language=eng"],
      ...["-metadata:s:a:2", "language=eng", "-metadata:s:a:2", 'title=Director\'s "cut"'],
      ...["-disposition:a:0", "0", "-disposition:a:1", "default", "-disposition:a:2", "0", tracks],
    ]);
    const probe = await transcoder.probe(tracks);
    // The video's length, not the commentary's (Matroska's tags, session 50; before, the file's 9 s).
    expect(probe.durationS).toBeCloseTo(3, 0);
    expect(probe.audioTracks[0]?.stream).toBe(2);
    expect(probe.audioTracks).toEqual([
      { stream: 2, language: "en", name: "English" },
      { stream: 1, language: "fr", name: "French" },
      // As the playlist can write it: a quote would end the attribute.
      { stream: 3, language: "en", name: "Director's 'cut'" },
    ]);
    const out = join(work, "three-tracks");
    const { renditions, audio } = await transcoder.transcode(tracks, out, probe, 1);
    await transcoder.package(out, renditions, audio);
    const master = readFileSync(join(out, MASTER_PLAYLIST), "utf8");
    expect(master).toContain(
      '#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="audio",NAME="English",LANGUAGE="en",DEFAULT=YES,AUTOSELECT=YES,CHANNELS="2"\n',
    );
    expect(master).toContain(
      '#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="audio",NAME="French",LANGUAGE="fr",DEFAULT=NO,AUTOSELECT=YES,CHANNELS="2",URI="audio_1/index.m3u8"\n',
    );
    expect(master).toContain(`NAME="Director's 'cut'",LANGUAGE="en",DEFAULT=NO`);
    const variants = master.split("\n").filter((line) => line.startsWith("#EXT-X-STREAM-INF"));
    expect(variants).toHaveLength(renditions.length);
    for (const variant of variants) expect(variant).toMatch(/,AUDIO="audio"$/);
    // A viewer on another track downloads it beside the rung (and the rung's own sound): the peak
    // stated is the rung's and the largest other track's together.
    expect(audio.others.map((track) => track.stream)).toEqual([1, 3]);
    const otherPeak = Math.max(...audio.others.map((track) => track.bandwidth));
    expect(otherPeak).toBeGreaterThan(50_000);
    expect(variants[0]).toContain(`BANDWIDTH=${(renditions[0]?.bandwidth ?? 0) + otherPeak},`);

    const meanVolume = (file: string) =>
      Number(
        /mean_volume: (-?[\d.]+) dB/.exec(
          spawnSync(
            locateMediaTools().ffmpeg,
            ["-v", "info", "-i", file, "-af", "volumedetect", "-f", "null", "-"],
            {
              encoding: "utf8",
            },
          ).stderr,
        )?.[1],
      );
    expect(meanVolume(join(out, "180p", "index.m3u8"))).toBeGreaterThan(-40);
    const french = meanVolume(join(out, "audio_1", "index.m3u8"));
    expect(french).toBeLessThan(-55);
    const commentary = meanVolume(join(out, "audio_3", "index.m3u8"));
    expect(commentary).toBeGreaterThan(-55);
    expect(commentary).toBeLessThan(-40);
    expect(readFileSync(join(out, "audio_1", "index.m3u8"), "utf8")).toContain("#EXT-X-PLAYLIST-TYPE:VOD");
    // Ended with the video: before session 50 every track was encoded whole (here 9 s for 3 s).
    expect(statedLength(readFileSync(join(out, "audio_3", "index.m3u8"), "utf8"))).toBeLessThan(3.3);
    // A player lines an audio rendition up with the picture by their timestamps: the rungs' own
    // sound and every other track start at the same instant.
    const audioStart = (file: string) =>
      probeStreams(file, "codec_type,start_time").find((stream) => stream.codec_type === "audio")?.start_time;
    const rungStart = audioStart(join(out, "180p", "segment_000.ts"));
    expect(rungStart).toBeDefined();
    expect(audioStart(join(out, "audio_1", "segment_000.ts"))).toBe(rungStart);
    expect(audioStart(join(out, "audio_3", "segment_000.ts"))).toBe(rungStart);
    // One track alone: no group, as before.
    const single = masterPlaylist(renditions, { lead: audio.lead, others: [] });
    expect(single).not.toContain("EXT-X-MEDIA");
    expect(single).not.toContain("AUDIO=");
  }, 60_000);

  it("names audio tracks distinctly as the playlist writes them, and gives only known languages", async () => {
    const titled = join(work, "titled-tracks.mkv");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=1", "sine=duration=1"),
      ...[
        "-map",
        "0",
        "-map",
        "1",
        "-map",
        "1",
        "-map",
        "1",
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-c:a",
        "aac",
      ],
      ...[
        "-metadata:s:a:0",
        'title=a"b',
        "-metadata:s:a:1",
        "title=a'b",
        "-metadata:s:a:2",
        "language=abcde",
        titled,
      ],
    ]);
    expect((await transcoder.probe(titled)).audioTracks).toEqual([
      { stream: 1, language: undefined, name: "a'b" },
      { stream: 2, language: undefined, name: "a'b (2)" },
      { stream: 3, language: undefined, name: "Audio 3" },
    ]);
  });

  it("never fails a video for another audio track: unusable ones are left out, and a run one fails is made without them", async () => {
    // A broadcast recording's declared track that carries nothing (0 Hz, 0 channels) beside its sound.
    const declared = join(work, "declared-track.ts");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=2"),
      ...lavfi("sine=duration=2", "sine=duration=2"),
      ...["-map", "0", "-map", "1", "-map", "2", "-c:v", "libx264", "-preset", "ultrafast"],
      ...["-c:a", "mp2", "-bsf:a:1", "noise=drop=1", declared],
    ]);
    expect((await transcoder.probe(declared)).audioTracks.map((track) => track.stream)).toEqual([1]);
    // A track whose packets are all gone, and ten channels with no layout to mix down from.
    const broken = join(work, "broken-tracks.mkv");
    const pads = Array.from({ length: 10 }, (_, index) => `[a${index}]`).join("");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=2", "sine=duration=2"),
      ...["-filter_complex", `[1:a]asplit=10${pads};${pads}amerge=inputs=10[ten]`],
      ...[
        "-map",
        "0:v",
        "-map",
        "1:a",
        "-map",
        "1:a",
        "-map",
        "[ten]",
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
      ],
      ...["-c:a:0", "aac", "-c:a:1", "aac", "-bsf:a:1", "noise=drop=1", "-c:a:2", "pcm_s16le", broken],
    ]);
    // The empty track is not taken either (since session 50: before, it was offered, and as the
    // default track it failed the run).
    const probe = await transcoder.probe(broken);
    expect(probe.audioTracks.map((track) => track.stream)).toEqual([1]);
    // Six channels of PCM naming no layout (a Blu-ray's 5.1 in Matroska): ffmpeg guesses 5.1 and
    // mixes it down, so it is kept (the first version of the check left such a video silent).
    const surround = join(work, "surround-pcm.mkv");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=1", "sine=duration=1"),
      ...[
        "-filter_complex",
        "[1:a]pan=5.1|c0=c0|c1=c0|c2=c0|c3=c0|c4=c0|c5=c0[six]",
        "-map",
        "0:v",
        "-map",
        "[six]",
      ],
      ...["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "pcm_s16le", surround],
    ]);
    expect(probeStreams(surround, "channels,channel_layout", ["-select_streams", "a"])).toEqual([
      { channels: 6 },
    ]);
    expect((await transcoder.probe(surround)).audioTracks.map((track) => track.stream)).toEqual([1]);
    const out = join(work, "broken-tracks");
    const made = await transcoder.transcode(broken, out, probe, 1);
    expect(made.audio.others).toEqual([]);
    expect(readdirSync(out)).not.toContain("audio_2");
    await transcoder.package(out, made.renditions, made.audio);
    expect(readFileSync(join(out, MASTER_PLAYLIST), "utf8")).not.toContain("EXT-X-MEDIA");
    // Whatever else an extra track makes ffmpeg fail on (here a stream the file does not have), the
    // video is made again without the extra tracks.
    const ghost = {
      ...probe,
      audioTracks: [...probe.audioTracks.slice(0, 1), { stream: 9, language: undefined, name: "Ghost" }],
    };
    const again = await transcoder.transcode(broken, join(work, "ghost-track"), ghost, 1);
    expect(again.tracksLeftOut).toBeDefined();
    expect(again.renditions).toHaveLength(1);
    expect(again.audio).toEqual({ lead: probe.audioTracks[0], others: [] });

    // A leading track ffmpeg cannot mix down (three channels laid out FL+FC+LFE) beside a good one:
    // each track is tried alone after the failed run, and the good one leads. Before session 50 the
    // lead was kept, and the video failed (QA of session 50).
    const unmixable = join(work, "unmixable-lead.mov");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=2", "sine=duration=2"),
      ...[
        "-filter_complex",
        "[1:a]asplit=4[a][b][c][d];[a][b][c]join=inputs=3:channel_layout=FL+FC+LFE[odd]",
      ],
      ...["-map", "0:v", "-map", "[odd]", "-map", "[d]", "-c:v", "libx264", "-preset", "ultrafast"],
      ...["-c:a:0", "pcm_s16le", "-c:a:1", "aac", unmixable],
    ]);
    const unmixableProbe = await transcoder.probe(unmixable);
    expect(unmixableProbe.audioTracks.map((track) => track.stream)).toEqual([1, 2]);
    const mixed = await transcoder.transcode(unmixable, join(work, "unmixable-lead"), unmixableProbe, 1);
    expect(mixed.tracksLeftOut).toBeDefined();
    expect(mixed.audio).toEqual({ lead: { stream: 2, language: undefined, name: "Audio 1" }, others: [] });
    const [sound] = probeStreams(join(work, "unmixable-lead", MP4_FILE), "codec_type", [
      "-select_streams",
      "a",
    ]);
    expect(sound).toEqual({ codec_type: "audio" });
    // That track alone: the video fails with ffmpeg's reason, rather than go silent unannounced.
    const unmixableOnly = join(work, "unmixable-only.mov");
    await tools.ffmpeg(["-i", unmixable, "-map", "0:v", "-map", "0:1", "-c", "copy", unmixableOnly]);
    await expect(
      transcoder.transcode(
        unmixableOnly,
        join(work, "unmixable-only"),
        await transcoder.probe(unmixableOnly),
        1,
      ),
    ).rejects.toThrow(MediaToolError);
  }, 60_000);

  it("leaves out the audio tracks that carry no packets at all, keeping the others, or makes the video silent when none is left", async () => {
    // The default track and the next one declared and never written, then English and Spanish.
    const emptyDefault = join(work, "empty-default.mkv");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=2", "sine=duration=2"),
      ...["-map", "0", ...["1", "1", "1", "1"].flatMap((input) => ["-map", input])],
      ...["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"],
      ...["-bsf:a:0", "noise=drop=1", "-bsf:a:1", "noise=drop=1"],
      ...["-metadata:s:a:2", "language=eng", "-metadata:s:a:3", "language=spa"],
      ...["-disposition:a", "0", "-disposition:a:0", "default", emptyDefault],
    ]);
    // Left out as the source is read (since session 50: before, only after the whole first run had
    // failed on them, at the source's end, and two of them failed the video).
    const probe = await transcoder.probe(emptyDefault);
    expect(probe.audioTracks.map((track) => track.stream)).toEqual([3, 4]);
    const made = await transcoder.transcode(emptyDefault, join(work, "empty-default"), probe, 1);
    expect(made.tracksLeftOut).toBeUndefined();
    expect(made.audio.lead).toEqual({ stream: 3, language: "en", name: "English" });
    expect(made.audio.others).toMatchObject([{ stream: 4, language: "es", name: "Spanish" }]);
    const [sound] = probeStreams(join(work, "empty-default", MP4_FILE), "codec_type", [
      "-select_streams",
      "a",
    ]);
    expect(sound).toEqual({ codec_type: "audio" });

    // The track that then leads runs 2 s past a 1 s picture: the hold is its own (before session
    // 50 it stayed the empty track's, none, and the playlists stated 1 s for 3 s of sound).
    const heldBehindEmpty = join(work, "held-behind-empty.mkv");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=1", "sine=duration=3"),
      ...["-map", "0", "-map", "1", "-map", "1", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"],
      ...["-bsf:a:0", "noise=drop=1", "-disposition:a", "0", "-disposition:a:0", "default", heldBehindEmpty],
    ]);
    const heldProbe = await transcoder.probe(heldBehindEmpty);
    expect(heldProbe.holdLastFrameS).toBeCloseTo(2, 1);
    const heldOut = join(work, "held-behind-empty");
    const held = await transcoder.transcode(heldBehindEmpty, heldOut, heldProbe, 1);
    expect(held.audio.lead?.stream).toBe(2);
    expect(held.durationS).toBeCloseTo(3, 0);
    expect(statedLength(readFileSync(join(heldOut, "90p", "index.m3u8"), "utf8"))).toBeGreaterThan(2.8);

    // Nor do they take places among the 8 tracks offered: one good track, seven empty ones and
    // three good ones offered only the first before session 50 (QA of session 50).
    const crowded = join(work, "crowded.mkv");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=1", "sine=duration=1"),
      ...["-map", "0", ...Array.from({ length: 11 }, () => ["-map", "1"]).flat()],
      ...["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"],
      ...[2, 3, 4, 5, 6, 7, 8].flatMap((track) => [`-bsf:a:${track - 1}`, "noise=drop=1"]),
      crowded,
    ]);
    expect((await transcoder.probe(crowded)).audioTracks.map((track) => track.stream)).toEqual([
      1, 9, 10, 11,
    ]);

    // A count ffprobe cannot make leaves the source as its header reads, as before session 50.
    const counting = testMediaTools();
    const headerOnly = counting.probe.bind(counting);
    const uncounted = new Transcoder(
      Object.assign(counting, {
        probe: (file: string, reading: ProbeReading = {}) =>
          reading.countPackets
            ? Promise.reject(new MediaToolError("ffprobe: unreadable"))
            : headerOnly(file, reading),
      }),
    );
    expect((await uncounted.probe(crowded)).audioTracks).toHaveLength(8);

    const emptyOnly = join(work, "empty-only.mkv");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=2", "sine=duration=2"),
      ...["-map", "0", "-map", "1", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"],
      ...["-bsf:a", "noise=drop=1", emptyOnly],
    ]);
    const silent = await transcoder.transcode(
      emptyOnly,
      join(work, "empty-only"),
      await transcoder.probe(emptyOnly),
      1,
    );
    expect(silent.audio).toEqual({ lead: undefined, others: [] });
    expect(silent.renditions).toHaveLength(1);
  }, 60_000);

  it("keeps sound that begins late, silent up to it in every segment, and leaves out sound past the wait", async () => {
    /** Where a file's sound begins, after the silence before it (`silencedetect`). */
    const soundBeginsS = (file: string) => {
      const { stderr } = spawnSync(
        locateMediaTools().ffmpeg,
        ["-hide_banner", "-i", file, "-af", "silencedetect=noise=-50dB:duration=1", "-f", "null", "-"],
        { encoding: "utf8" },
      );
      return Number(/silence_end: ([\d.]+)/.exec(stderr)?.[1]);
    };
    /** Audio packets in a rendition's first segment: hls.js cannot play one whose sound comes later. */
    const soundPacketsAtStart = (rendition: string) =>
      Number(
        probeStreams(join(rendition, "segment_000.ts"), "nb_read_packets", [
          "-count_packets",
          "-select_streams",
          "a",
        ])[0]?.nb_read_packets,
      );

    const H264_AAC = ["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"];
    /** `name` in `work`: `picture` (a lavfi source) and a tone of `toneS` beginning `soundAtS` in. */
    const soundAt = async (
      name: string,
      {
        picture,
        soundAtS,
        toneS,
        codecs = H264_AAC,
      }: { picture: string; soundAtS: number; toneS: number; codecs?: string[] },
    ) => {
      const file = join(work, name);
      await tools.ffmpeg([
        ...lavfi(picture),
        ...["-itsoffset", String(soundAtS), ...lavfi(`sine=duration=${toneS}`)],
        ...codecs,
        file,
      ]);
      return file;
    };

    // A transport stream's sound 7 s in: ffmpeg's analysis of the first 5 s found no rate or channels,
    // and the video was made silent without a reason (QA of session 51).
    const lateSound = await soundAt("late-sound.ts", {
      picture: "testsrc=size=160x90:rate=25:duration=10",
      soundAtS: 7,
      toneS: 3,
    });
    const probe = await transcoder.probe(lateSound);
    expect(probe.audioTracks.map((track) => track.stream)).toEqual([1]);
    expect(probe.inputOptions).toEqual(expect.arrayContaining(["-analyzeduration", "-probesize"]));
    const out = join(work, "late-sound");
    const made = await transcoder.transcode(lateSound, out, probe, 1);
    expect(made.audio.lead?.stream).toBe(1);
    expect(soundPacketsAtStart(join(out, "90p"))).toBeGreaterThan(0);
    expect(soundBeginsS(join(out, MP4_FILE))).toBeCloseTo(7, 0);

    // An MP2 track 12 s in: reading every packet learns its rate, but not where it begins, which an
    // MPEG-TS states nowhere. Its first segments had no sound, and the MP4's copy failed the video
    // (QA of session 51's own first reading).
    const lateMp2 = await soundAt("late-mp2.ts", {
      picture: "testsrc=size=320x180:rate=25:duration=16",
      soundAtS: 12,
      toneS: 4,
      codecs: ["-c:v", "mpeg2video", "-q:v", "8", "-c:a", "mp2"],
    });
    const mp2Probe = await transcoder.probe(lateMp2);
    expect(mp2Probe.lateSound).toEqual([1]);
    const mp2Out = join(work, "late-mp2");
    await transcoder.transcode(lateMp2, mp2Out, mp2Probe, 1);
    expect(soundPacketsAtStart(join(mp2Out, "180p"))).toBeGreaterThan(0);
    expect(soundBeginsS(join(mp2Out, MP4_FILE))).toBeCloseTo(12, 0);

    // A source whose sound is analyzed within the first seconds is read as before.
    expect((await transcoder.probe(clip)).inputOptions).toEqual(SOURCE_READING);

    // An MP4 states its sound's rate and channels, and where it begins, but the rung copied into the
    // MP4 did not before its first sound: sound 6 s in failed the copy ("Could not write header"),
    // and the video with it, until session 51 (QA); and a second track 4 s in was offered as 4 s of
    // rendition with its sound misplaced.
    const lateInMp4 = join(work, "late-sound.mp4");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=9"),
      ...["-itsoffset", "6", ...lavfi("sine=duration=3")],
      ...["-itsoffset", "4", ...lavfi("sine=frequency=880:duration=5")],
      ...["-map", "0", "-map", "1", "-map", "2", ...H264_AAC, lateInMp4],
    ]);
    const mp4Probe = await transcoder.probe(lateInMp4);
    expect(mp4Probe.inputOptions).toEqual(SOURCE_READING);
    expect(mp4Probe.lateSound).toEqual([1, 2]);
    const mp4Out = join(work, "late-sound-mp4");
    const fromMp4 = await transcoder.transcode(lateInMp4, mp4Out, mp4Probe, 1);
    expect(soundPacketsAtStart(join(mp4Out, "90p"))).toBeGreaterThan(0);
    expect(soundBeginsS(join(mp4Out, MP4_FILE))).toBeCloseTo(6, 0);
    expect(fromMp4.audio.others.map((track) => track.stream)).toEqual([2]);
    const otherDirectory = join(mp4Out, "audio_2");
    expect(soundPacketsAtStart(otherDirectory)).toBeGreaterThan(0);
    expect(statedLength(readFileSync(join(otherDirectory, "index.m3u8"), "utf8"))).toBeGreaterThan(8.5);

    // Matroska states its sound's rate and channels, but not where it begins: read further too.
    const lateInMatroska = await soundAt("late-sound.mkv", {
      picture: "testsrc=size=320x180:rate=25:duration=12",
      soundAtS: 8,
      toneS: 4,
    });
    const matroskaProbe = await transcoder.probe(lateInMatroska);
    expect(matroskaProbe.lateSound).toEqual([1]);
    const matroskaOut = join(work, "late-sound-mkv");
    await transcoder.transcode(lateInMatroska, matroskaOut, matroskaProbe, 1);
    expect(soundPacketsAtStart(join(matroskaOut, "180p"))).toBeGreaterThan(0);

    // Sound that begins with the picture is not filtered: ffmpeg starts a filter anew where the
    // sound's rate or channels change (a broadcast recording's), and a filter filling the time from
    // the start put 6 s of silence in the middle of this 12 s source (QA of session 51's own fix).
    const changing = join(work, "sound-changing.ts");
    const halves = [
      ["sine=frequency=440:sample_rate=48000:duration=6", "2", "0"],
      ["sine=frequency=880:sample_rate=44100:duration=6", "1", "6"],
    ].map(([sound, channels, offset], index) => ({
      sound,
      channels,
      offset,
      file: join(work, `half-${index}.ts`),
    }));
    for (const half of halves) {
      await tools.ffmpeg([
        ...lavfi("testsrc=size=160x90:rate=25:duration=6", half.sound ?? ""),
        ...["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-ac", half.channels ?? "2"],
        ...["-output_ts_offset", half.offset ?? "0", half.file],
      ]);
    }
    writeFileSync(changing, Buffer.concat(halves.map((half) => readFileSync(half.file))));
    const changingProbe = await transcoder.probe(changing);
    expect(changingProbe.lateSound).toEqual([]);
    const changingOut = join(work, "sound-changing");
    await transcoder.transcode(changing, changingOut, changingProbe, 1);
    expect(
      Number(probeStreams(join(changingOut, MP4_FILE), "duration", ["-select_streams", "a"])[0]?.duration),
    ).toBeLessThan(12.5);

    // Sound further in than the renditions' muxers wait for it is not taken: the picture was
    // written alone, the sound after it.
    const tooLate = await soundAt("too-late-sound.mp4", {
      picture: "testsrc=size=160x90:rate=5:duration=58",
      soundAtS: MAX_SOUND_START_S + 5,
      toneS: 1,
    });
    expect((await transcoder.probe(tooLate)).audioTracks).toEqual([]);
  }, 90_000);

  it("counts packets in the header's reading without taking in a stream found only further in", async () => {
    // A transport stream whose sound begins in a second program, after 12 s of picture: ffmpeg's
    // reading of the header never finds it, so mapping it would fail the run. The whole file is read
    // to count packets, and ffprobe still lists only the streams of the header.
    const pictureFirst = join(work, "picture-first.ts");
    const soundLater = join(work, "sound-later.ts");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=12"),
      ...["-c:v", "libx264", "-preset", "ultrafast", pictureFirst],
    ]);
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=2", "sine=duration=2"),
      ...["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"],
      ...["-mpegts_service_id", "7", "-mpegts_pmt_start_pid", "0x1200", soundLater],
    ]);
    const joined = join(work, "sound-found-later.ts");
    writeFileSync(joined, Buffer.concat([readFileSync(pictureFirst), readFileSync(soundLater)]));
    const probe = await transcoder.probe(joined);
    expect(probe.audioTracks).toEqual([]);
    const made = await transcoder.transcode(joined, join(work, "sound-found-later"), probe, 1);
    expect(made.audio.lead).toBeUndefined();
    expect(made.tracksLeftOut).toBeUndefined();
  }, 60_000);

  it("takes no stream's length past the container's, and holds the last frame for at most a minute of sound", () => {
    const timeline = { start: 0, videoEnd: 6, audioEnd: 36_006, containerS: 6, averageRate: 30 };
    // An audio header claiming 10 hours in a 6 s file made 10 hours of renditions (QA of session 48).
    expect(lengthOf(timeline)).toBe(6);
    expect(soundPastPictureS(timeline, 6)).toBe(0);
    // Ten minutes of sound behind 2 s of picture: left at 2 s (docs/video.md).
    const long = { ...timeline, videoEnd: 2, audioEnd: 602, containerS: 602 };
    expect(soundPastPictureS(long, lengthOf(long) ?? 0)).toBe(0);
    const held = { ...timeline, videoEnd: 4, audioEnd: 7, containerS: 7 };
    expect(soundPastPictureS(held, lengthOf(held) ?? 0)).toBe(3);
    // Matroska keeps no length per stream: the container's.
    expect(
      lengthOf({
        start: undefined,
        videoEnd: undefined,
        audioEnd: undefined,
        containerS: 7,
        averageRate: 30,
      }),
    ).toBe(7);
  });

  it("keeps sound and picture in the same segments when the source's frames are seconds apart", async () => {
    // A still screen's recording: two frames 24 s apart over 25 s of sound.
    const still = join(work, "still-screen.mkv");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=25,select='eq(n\\,0)+eq(n\\,600)'"),
      ...["-f", "lavfi", "-i", "sine=duration=25", "-fps_mode", "vfr"],
      ...["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", still],
    ]);
    const out = join(work, "still-screen");
    // Before the QA of session 48 the sound went up to 20 s ahead into the first segments, and the
    // MP4's copy failed: "Error initializing output stream 0:1".
    const { playableS } = await transcoder.transcode(still, out, await transcoder.probe(still), 1);
    expect(playableS).toBeGreaterThan(24);
    expect(playableS).toBeLessThan(26);
    const segment = probeStreams(join(out, "90p", "segment_002.ts"), "codec_type,duration");
    for (const stream of segment) expect(Number(stream.duration), stream.codec_type).toBeLessThan(4.5);
  }, 60_000);

  it("counts sound before the first frame in the length, as the renditions hold it", async () => {
    const early = join(work, "sound-first.mp4");
    await tools.ffmpeg([
      ...lavfi("sine=duration=3"),
      ...lavfi("testsrc=size=160x90:rate=25:duration=1"),
      ...["-filter_complex", "[1:v]setpts=PTS+2/TB[v]", "-map", "[v]", "-map", "0:a"],
      ...["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", early],
    ]);
    const probe = await transcoder.probe(early);
    expect(probe.durationS).toBeGreaterThan(2.8);
    expect(probe.durationS).toBeLessThan(3.3);
  }, 60_000);

  it("counts a source's length from its first frame or sound, not from before an edit list's lead-in", async () => {
    const late = join(work, "late-start.mp4");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=4"),
      ...["-f", "lavfi", "-i", "sine=duration=4", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"],
      ...["-shortest", "-output_ts_offset", "5", late],
    ]);
    // The container reads 9 s long: thumbnails were sliced over 9 s, four of five the last frame.
    const probe = await transcoder.probe(late);
    expect(probe.durationS).toBeGreaterThan(3.9);
    expect(probe.durationS).toBeLessThan(4.2);
  }, 60_000);

  it("holds the last frame while the sound runs on past the picture, so the playlists state the whole length", async () => {
    const longer = join(work, "sound-past-picture.mp4");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=1"),
      ...[
        "-f",
        "lavfi",
        "-i",
        "sine=duration=2.5",
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-c:a",
        "aac",
        longer,
      ],
    ]);
    const probe = await transcoder.probe(longer);
    expect(probe.holdLastFrameS).toBeGreaterThan(1.4);
    const out = join(work, "sound-past-picture");
    await transcoder.transcode(longer, out, probe, 1);
    // Before the QA of session 48 the playlist said 1 s for a segment holding 2.5 s of sound.
    const stated = statedLength(readFileSync(join(out, "90p", "index.m3u8"), "utf8"));
    expect(stated).toBeGreaterThan(2.3);
    expect(stated).toBeLessThan(2.7);
    expect((await transcoder.probe(clip)).holdLastFrameS).toBe(0);

    // Matroska as ffmpeg (and OBS) writes it has no length per stream but its DURATION tags: held
    // too since session 50 (before, 1 s of picture stood for 2.5 s of sound, as above).
    const matroska = join(work, "sound-past-picture.mkv");
    await tools.ffmpeg(["-i", longer, "-c", "copy", matroska]);
    expect(probeStreams(matroska, "duration", ["-select_streams", "a"])).toEqual([{}]);
    const tagged = await transcoder.probe(matroska);
    expect(tagged.holdLastFrameS).toBeCloseTo(probe.holdLastFrameS, 1);
    expect(tagged.durationS).toBeCloseTo(probe.durationS, 1);
    await transcoder.transcode(matroska, join(work, "sound-past-picture-mkv"), tagged, 1);
    const statedMatroska = readFileSync(join(work, "sound-past-picture-mkv", "90p", "index.m3u8"), "utf8");
    expect(statedLength(statedMatroska)).toBeGreaterThan(2.3);
  }, 60_000);

  it("reads where Matroska's streams end from their DURATION tags, as ffmpeg and mkvmerge write them, unless the file ends elsewhere", () => {
    const video = { index: 0, codec_type: "video", avg_frame_rate: "25/1" };
    const audio = { index: 1, codec_type: "audio" };
    const file = (format: ProbeJson["format"], streams: [ProbeStream, ProbeStream]) =>
      timelineOfHeader({ format, streams }, ...streams);
    // ffmpeg's muxer: the stream's end.
    expect(
      file({ start_time: "0.000000", duration: "7.023000" }, [
        { ...video, start_time: "0.023000", tags: { DURATION: "00:00:02.023000000" } },
        { ...audio, start_time: "0.000000", tags: { DURATION: "00:00:07.023000000" } },
      ]),
    ).toMatchObject({ start: 0, videoEnd: 2.023, audioEnd: 7.023 });
    // mkvmerge's statistics: the stream's length from its first frame, the tags named with a language.
    const statistics = { "_STATISTICS_TAGS-eng": "BPS DURATION NUMBER_OF_FRAMES NUMBER_OF_BYTES" };
    expect(
      file({ start_time: "0.000000", duration: "67.035000" }, [
        { ...video, start_time: "0.024000", tags: { "DURATION-eng": "00:01:02.000000000", ...statistics } },
        { ...audio, start_time: "0.000000", tags: { "DURATION-eng": "00:01:07.035000000", ...statistics } },
      ]),
    ).toMatchObject({ start: 0, videoEnd: 62.024, audioEnd: 67.035 });
    // Statistics on a stream that starts late: mkvmerge's length, or an end ffmpeg wrote over the
    // statistics it copied? Each tool copies what would tell (QA of session 50: either reading was
    // a second off for one of them), so such a file is not held, as before session 50.
    const copied = { DURATION: "00:00:03.000000000", _STATISTICS_TAGS: "BPS DURATION" };
    expect(
      file({ start_time: "0.000000", duration: "5.000000" }, [
        { ...video, start_time: "1.000000", tags: copied },
        { ...audio, start_time: "0.000000", tags: { ...copied, DURATION: "00:00:05.000000000" } },
      ]),
    ).toMatchObject({ start: undefined, videoEnd: undefined, audioEnd: undefined });
    // Matroska's own length is where its timestamps end: a file starting at 10 s is held too.
    expect(
      file({ start_time: "9.977000", duration: "15.000000" }, [
        { ...video, start_time: "10.000000", tags: { DURATION: "00:00:12.000000000" } },
        { ...audio, start_time: "9.977000", tags: { DURATION: "00:00:15.000000000" } },
      ]),
    ).toMatchObject({ start: 9.977, videoEnd: 12, audioEnd: 15 });
    // Tags left from before the file was cut end past it: not taken, as before session 50.
    expect(
      file({ start_time: "0.000000", duration: "3.000000" }, [
        { ...video, start_time: "0.000000", tags: { DURATION: "00:00:02.000000000" } },
        { ...audio, start_time: "0.000000", tags: { DURATION: "00:00:07.000000000" } },
      ]),
    ).toMatchObject({ start: undefined, videoEnd: undefined, audioEnd: undefined, containerS: 3 });
    // A stream without a tag leaves both as the container's.
    expect(
      file({ start_time: "0.000000", duration: "7.000000" }, [
        { ...video, start_time: "0.000000", tags: { DURATION: "00:00:02.000000000" } },
        { ...audio, start_time: "0.000000", tags: { DURATION: "7 s" } },
      ]),
    ).toMatchObject({ videoEnd: undefined, audioEnd: undefined, containerS: 7 });
  });

  it("holds a short picture over up to a minute of sound, sound in every segment, its thumbnails taken from the picture", async () => {
    const short = join(work, "short-picture.mp4");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=1", "sine=duration=40"),
      ...["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", short],
    ]);
    const probe = await transcoder.probe(short);
    expect(probe.holdLastFrameS).toBeCloseTo(39, 0);
    const out = join(work, "short-picture");
    const { thumbnails } = await transcoder.transcode(short, out, probe, 5);
    const playlist = readFileSync(join(out, "90p", "index.m3u8"), "utf8");
    const stated = statedLength(playlist);
    expect(stated).toBeGreaterThan(39);
    expect(stated).toBeLessThan(41);
    // Each segment carries its own stretch of the sound: with the picture read apart from the
    // sound (a first version of session 49), segments past the sound's lead had none.
    for (const segment of playlist.split("\n").filter((line) => line.endsWith(".ts"))) {
      const [sound] = probeStreams(join(out, "90p", segment), "duration", ["-select_streams", "a"]);
      expect(Number(sound?.duration), segment).toBeGreaterThan(0.5);
    }
    // Five moments of the picture, not copies of its held last frame (all five were, before).
    const pictures = new Set(thumbnails.map((name) => readFileSync(join(out, name)).toString("base64")));
    expect(pictures.size).toBe(5);
  }, 60_000);

  it("tone-maps an HDR (PQ or HLG) source into BT.709 renditions, tagged as such", async () => {
    const colorOf = (file: string) => {
      const [stream] = probeStreams(file, "color_transfer,color_primaries,pix_fmt", [
        "-select_streams",
        "v:0",
      ]);
      return [stream?.color_transfer, stream?.color_primaries, stream?.pix_fmt];
    };
    /**
     * How far apart two videos' first frames are: the mean of each pixel's absolute luma difference,
     * on 8 bits. A mean over the whole frame would not do: tone mapping brightens some colours and
     * darkens others, and on a test card they may nearly cancel out.
     */
    const lumaDistance = async (file: string, other: string) => {
      const report = `${file}.distance`;
      await tools.ffmpeg([
        ...["-i", file, "-i", other],
        "-lavfi",
        `[0:v]format=yuv420p[a];[1:v]format=yuv420p[b];[a][b]blend=all_mode=difference,signalstats,metadata=print:key=lavfi.signalstats.YAVG:file=${report}`,
        ...["-frames:v", "1", "-f", "null", "-"],
      ]);
      return Number(/YAVG=([\d.]+)/.exec(readFileSync(report, "utf8"))?.[1]);
    };
    for (const transfer of ["smpte2084", "arib-std-b67"]) {
      const hdr = join(work, `hdr-${transfer}.mp4`);
      // Ten bits with HDR tags; the primaries of the HLG one are left untagged, as cameras often do.
      await tools.ffmpeg([
        ...lavfi("testsrc=size=320x180:rate=25:duration=1"),
        ...["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p10le", "-color_trc", transfer],
        ...(transfer === "smpte2084" ? ["-color_primaries", "bt2020", "-colorspace", "bt2020nc"] : []),
        hdr,
      ]);
      const probe = await transcoder.probe(hdr);
      expect(probe.hdr).toEqual({ transfer, fullRange: false });
      const out = join(work, `hdr-out-${transfer}`);
      await transcoder.transcode(hdr, out, probe, 1);
      expect(colorOf(join(out, MP4_FILE))).toEqual(["bt709", "bt709", "yuv420p"]);
      expect(colorOf(join(out, "180p", "segment_000.ts"))).toEqual(["bt709", "bt709", "yuv420p"]);
      // Tone-mapped, not only tagged: the picture differs from the HDR values shown as they are (16-22
      // on 8 bits with Debian's ffmpeg 5.1; a rendition only converted to 8 bits and tagged: 0.3).
      expect(await lumaDistance(join(out, MP4_FILE), hdr)).toBeGreaterThan(5);
    }
    expect((await transcoder.probe(clip)).hdr).toBeUndefined();
  }, 120_000);

  it("keeps the preview to the first 3 seconds at 10 fps, whatever the source's rate and length", async () => {
    const slow = await generateClip(work, { width: 160, height: 90, rate: 1, seconds: 8, audio: false });
    const out = join(work, "one-fps");
    await transcoder.transcode(slow, out, await transcoder.probe(slow), 1);
    // An animated WebP holds one ANMF chunk per frame.
    const frames = readFileSync(join(out, PREVIEW_FILE)).toString("latin1").split("ANMF").length - 1;
    expect(frames).toBeGreaterThan(0);
    expect(frames).toBeLessThanOrEqual(30);
  }, 60_000);

  it("bounds the preview of a very tall source, which otherwise passed WebP's 16383 pixels", async () => {
    const tall = await generateClip(work, { width: 16, height: 4000, seconds: 1, audio: false });
    const out = join(work, "tall");
    await transcoder.transcode(tall, out, await transcoder.probe(tall), 1);
    const preview = readFileSync(join(out, PREVIEW_FILE));
    expect(preview.subarray(8, 12).toString("latin1")).toBe("WEBP");
    // The canvas size of an animated WebP's VP8X chunk: 24-bit width and height, each less one.
    const size = (at: number) => preview.readUIntLE(at, 3) + 1;
    expect([size(24), size(27)]).toEqual([6, 1280]);
  }, 60_000);

  it("takes an audio file's cover art for no video", async () => {
    const song = join(work, "song.mp3");
    await tools.ffmpeg([
      "-f",
      "lavfi",
      "-i",
      "sine=frequency=440:duration=1",
      "-f",
      "lavfi",
      "-i",
      "color=red:size=64x64:duration=1",
      "-map",
      "0",
      "-map",
      "1",
      "-frames:v",
      "1",
      "-c:a",
      "libmp3lame",
      "-c:v",
      "mjpeg",
      "-disposition:v",
      "attached_pic",
      song,
    ]);
    await expect(transcoder.probe(song)).rejects.toThrow("the file has no video stream");
  }, 60_000);

  it("declares the lowest H.264 level a rung's size and frame rate fit", () => {
    expect(levelFor(1280, 720, 30)).toBe(31);
    expect(levelFor(1280, 720, 60)).toBe(32);
    expect(levelFor(1920, 1080, 30)).toBe(40);
    expect(levelFor(1920, 1080, 120)).toBe(51);
    expect(levelFor(854, 480, 25)).toBe(30);
    expect(levelFor(854, 480, 30)).toBe(31);
    // The longest side counts too: 250 macroblocks down fits 3.0's frame size but not its shape.
    expect(levelFor(16, 4000, 30)).toBe(40);
    expect(levelFor(1080, 1920, 30)).toBe(40);
  });

  it("reads a packet list as it comes, whatever its size or where its chunks split lines", () => {
    const timeline = new PacketTimeline(0, 1);
    const text =
      "1,-0.007000,0.020000\n0,0.000000,N/A,\n\n0,0.040000,N/A\n1,0.013000,0.020000\n0,0.080000,0.040000\n1,4.990000,0.020000\n";
    for (let at = 0; at < text.length; at += 7) timeline.push(text.slice(at, at + 7));
    const { start, videoEnd, audioEnd, averageRate } = timeline.finish();
    expect([start, videoEnd, audioEnd]).toEqual([-0.007, 0.12, 5.01]);
    expect(averageRate).toBeCloseTo(25, 5);
  });

  it("names what failed, not only ffmpeg's wrap-up, in a failure's reason", async () => {
    expect(
      failureReason(
        "[h264 @ 0x55d1c0a3e2c0] error while decoding MB 3 2\nCannot determine format of input stream 0:0 after EOF\nError marking filters as finished\n",
      ),
    ).toBe("Cannot determine format of input stream 0:0 after EOF (Error marking filters as finished)");
    expect(
      failureReason("[aac @ 0x5611] Unsupported channel layout\nError initializing output stream 0:1 -- \n"),
    ).toBe("aac: Unsupported channel layout (Error initializing output stream 0:1)");
    expect(failureReason("[mov,mp4,m4a,3gp,3g2,mj2 @ 0x1] moov atom not found\n")).toBe(
      "mov,mp4,m4a,3gp,3g2,mj2: moov atom not found",
    );
    expect(failureReason("Invalid data found when processing input\n")).toBe(
      "Invalid data found when processing input",
    );
    // A picture whose every frame is damaged: before session 50 its reason was the wrap-up alone.
    const damaged = join(work, "damaged-picture.mkv");
    await tools.ffmpeg([
      ...lavfi("testsrc=size=160x90:rate=25:duration=2"),
      ...["-c:v", "libx264", "-preset", "ultrafast", "-bsf:v", "noise=amount=2", damaged],
    ]);
    const failure = await transcoder
      .transcode(damaged, join(work, "damaged-picture"), await transcoder.probe(damaged), 1)
      .catch((error: Error) => error);
    expect(failure).toBeInstanceOf(MediaToolError);
    expect(String(failure)).not.toMatch(/ffmpeg: Error marking filters as finished$/);
  }, 60_000);

  it("rejects corrupt input with a reason", async () => {
    const corrupt = join(work, "corrupt.mp4");
    writeFileSync(corrupt, Buffer.concat([Buffer.from("\x00\x00\x00\x18ftypmp42"), Buffer.alloc(4096, 7)]));
    await expect(transcoder.probe(corrupt)).rejects.toBeInstanceOf(MediaToolError);
    const text = join(work, "notes.mp4");
    writeFileSync(text, "this is not a video");
    await expect(transcoder.probe(text)).rejects.toThrow(MediaToolError);
  });

  it("takes an output the disk cannot take for the disk's fault, also when ffmpeg exits 0", async () => {
    // /dev/full answers every write with ENOSPC, and ffmpeg says so in strerror's words. Where only
    // the trailer could not be written (mpegts), it still exits 0.
    const failure = (format: string[]) =>
      tools.ffmpeg(["-i", clip, "-frames:v", "1", ...format, "/dev/full"]).then(
        () => "succeeded",
        (error: Error) => error,
      );
    for (const format of [
      ["-c", "copy", "-f", "mpegts"],
      ["-f", "image2", "-update", "1"],
    ]) {
      const error = await failure(format);
      expect(error, format.join(" ")).toBeInstanceOf(ScratchDiskError);
      expect((error as ScratchDiskError).message).not.toContain("/dev/full");
      expect(((error as ScratchDiskError).cause as Error).message).toMatch(/No space left on device/);
    }
  });

  // QA of 5 December (session 42): with no file descriptors left (idle connections held open by
  // anyone), ffmpeg could not start, and its "error" event, emitted with no listener yet, ended the
  // whole node. In a process of its own, whose descriptors it uses up first.
  it("fails a run whose tool cannot start for want of file descriptors, and the process goes on", () => {
    const script = join(work, "emfile.mts");
    writeFileSync(
      script,
      `import { openSync } from "node:fs";
      const { MediaTools, locateMediaTools } = await import(${JSON.stringify(new URL("../../src/video/media-tools.ts", import.meta.url).pathname)});
      const tools = new MediaTools(locateMediaTools(), { concurrency: 1, timeoutMs: 10_000 });
      const held = [];
      try { for (;;) held.push(openSync("/dev/null", "r")); } catch {}
      const outcome = await tools.probe("/dev/null").then(() => "ran", (error) => error.name + " " + error.code);
      await new Promise((resolve) => setTimeout(resolve, 300));
      console.log(outcome);`,
    );
    const run = spawnSync(
      "sh",
      ["-c", `ulimit -n 64 && exec "${process.execPath}" --import tsx "${script}"`],
      {
        encoding: "utf8",
      },
    );
    expect([run.status, run.stdout.trim()], run.stderr).toEqual([0, "ToolStartError EMFILE"]);
  });

  it("kills a tool that runs past its timeout", async () => {
    const impatient = new MediaTools(locateMediaTools(), { concurrency: 1, timeoutMs: 200 });
    await expect(
      impatient.ffmpeg([
        "-f",
        "lavfi",
        "-i",
        "testsrc=size=1280x720:rate=25",
        "-t",
        "600",
        "-f",
        "null",
        "-",
      ]),
    ).rejects.toThrow(/timed out/);
  });
});
