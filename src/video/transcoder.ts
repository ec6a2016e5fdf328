import { copyFile, mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  type AudioTrack,
  FURTHER_ANALYSIS,
  type HdrTransfer,
  MediaToolError,
  type MediaTools,
  type ProbeResult,
  SOURCE_READING,
  sourceInput,
  ToolTimedOutError,
} from "./media-tools.ts";
import { attributeText } from "./playlists.ts";

/**
 * Rungs of the HLS ladder, each named by the picture's short side as video platforms name them: a
 * landscape 1080p is 1920x1080, a portrait one 1080x1920. A source gets every rung up to its own
 * short side.
 */
export const LADDER = [
  { size: 1080, videoKbps: 5000 },
  { size: 720, videoKbps: 2800 },
  { size: 480, videoKbps: 1400 },
  { size: 360, videoKbps: 800 },
  { size: 240, videoKbps: 400 },
] as const;

const AUDIO_KBPS = 128;
const SEGMENT_S = 4;
/** How far the sound may run ahead of the picture, waiting for it, before it is written anyway. */
const INTERLEAVE_WAIT_S = 60;
/** The MP4 is the largest rung up to 720p. */
const MP4_MAX_SIZE = 720;
const THUMBNAIL_HEIGHT = 360;
const PREVIEW_SECONDS = 3;
const PREVIEW_WIDTH = 320;
/**
 * A preview 320 px wide is at most this high: a source 51 times taller than wide made one past
 * WebP's 16383 pixels, and the whole video failed (QA of 4 December). Taller ones keep their shape
 * at this height, narrower.
 */
const PREVIEW_MAX_HEIGHT = 1280;
const PREVIEW_FPS = 10;

export const MASTER_PLAYLIST = "playlist.m3u8";
export const MP4_FILE = "play.mp4";
export const PREVIEW_FILE = "preview.webp";
/** The video's picture as viewers ask for it (a generated frame, or the uploaded thumbnail). */
export const THUMBNAIL_FILE = "thumbnail.jpg";
export const THUMBNAIL_DIR = "thumbnails";

export interface Rung {
  /** The picture's short side. */
  size: number;
  videoKbps: number;
}

/**
 * H.264 levels by the most macroblocks a second and in a frame they allow (ITU-T H.264, table A-1),
 * lowest first.
 */
const LEVELS = [
  { level: 30, perSecond: 40_500, perFrame: 1_620 },
  { level: 31, perSecond: 108_000, perFrame: 3_600 },
  { level: 32, perSecond: 216_000, perFrame: 5_120 },
  { level: 40, perSecond: 245_760, perFrame: 8_192 },
  { level: 42, perSecond: 522_240, perFrame: 8_704 },
  { level: 50, perSecond: 589_824, perFrame: 22_080 },
  { level: 51, perSecond: 983_040, perFrame: 36_864 },
  { level: 52, perSecond: 2_073_600, perFrame: 36_864 },
];

/**
 * The lowest H.264 level a rung's size and frame rate fit, set explicitly so the CODECS attribute
 * is known: a player trusts it to pick the streams its decoder can play (a 720p60 rung needs 3.2).
 */
export function levelFor(width: number, height: number, frameRate: number): number {
  const across = Math.ceil(width / 16);
  const down = Math.ceil(height / 16);
  const perFrame = across * down;
  const perSecond = perFrame * frameRate;
  // Neither side may pass sqrt(8 x the frame's macroblocks) (Annex A.3.1): a 16x4000 picture is 4.0, not 3.0.
  const longest = Math.max(across, down);
  const fits = LEVELS.find(
    (level) =>
      perFrame <= level.perFrame && perSecond <= level.perSecond && longest ** 2 <= level.perFrame * 8,
  );
  return (fits ?? (LEVELS.at(-1) as (typeof LEVELS)[number])).level;
}

export interface Rendition {
  height: number;
  width: number;
  /** Peak bits per second over its segments, as measured. */
  bandwidth: number;
  averageBandwidth: number;
  codecs: string;
  /** Media playlist, relative to the output directory. */
  playlist: string;
}

const even = (value: number) => Math.max(2, Math.round(value / 2) * 2);
/** The even number at or below `value` (at least 2): a size H.264 takes that is no upscale. */
const evenAtMost = (value: number) => Math.max(2, Math.floor(value / 2) * 2);

/** The rungs of a source whose picture's short side is `sourceSize`: one of its own size below 240. */
export function ladderFor(sourceSize: number): Rung[] {
  const rungs = LADDER.filter((rung) => rung.size <= sourceSize).map((rung) => ({ ...rung }));
  return rungs.length > 0 ? rungs : [{ size: evenAtMost(sourceSize), videoKbps: 400 }];
}

/** A rung's picture: its short side `size`, its long side keeping the source's shape, never wider than the source's. */
export function rungDimensions(source: { width: number; height: number }, size: number) {
  const landscape = source.width >= source.height;
  const [long, short] = landscape ? [source.width, source.height] : [source.height, source.width];
  const scaledLong = Math.min(even((long * size) / short), evenAtMost(long));
  return landscape ? { width: scaledLong, height: size } : { width: size, height: scaledLong };
}

/** `avc1.PPCCLL` of the High profile at a level, e.g. 3.1 -> avc1.64001f. */
export const highProfileCodec = (level: number): string => `avc1.6400${level.toString(16).padStart(2, "0")}`;

/** The width that keeps the source's shape at `height`, rounded to an even number as H.264 needs. */
export const scaledWidth = (source: { width: number; height: number }, height: number) =>
  even((source.width * height) / source.height);

/**
 * An interlaced source's fields made whole frames, one per source frame, before anything scales them:
 * the scaler would otherwise blend the two moments of each frame into a combed, doubled picture.
 */
const deinterlacing = (probe: ProbeResult): string =>
  probe.interlaced ? "bwdif=mode=send_frame:parity=auto:deint=all," : "";

/**
 * The filters that make the renditions' frames from the source's: deinterlacing, their frame rate,
 * and the last frame held while sound goes on.
 */
function pictureTiming(probe: ProbeResult): string {
  const rate = probe.renditionRate ? `fps=${probe.renditionRate},` : "";
  const hold =
    probe.holdLastFrameS > 0 ? `tpad=stop_mode=clone:stop_duration=${probe.holdLastFrameS.toFixed(3)},` : "";
  return deinterlacing(probe) + rate + hold;
}

/**
 * The frames the thumbnails are taken from: one per equal slice of the picture. A held last frame
 * is no picture of the video, so a held source's slices are of its own picture, and the branch ends
 * a second after it: frames made by the hold are asked for by the outputs rather than read, and a
 * branch still waiting for its next thumbnail was asked first every time while the rungs' frames
 * piled up for it.
 */
function thumbnailFrames(probe: ProbeResult, count: number): string {
  const pictureS = probe.durationS - probe.holdLastFrameS;
  const selection = `setpts=PTS-STARTPTS,select='${thumbnailSelection(pictureS, count)}'`;
  return probe.holdLastFrameS > 0 ? `trim=duration=${(pictureS + 1).toFixed(3)},${selection}` : selection;
}

/** `width:height` of the animated preview: 320 px wide, or narrower for a very tall source. */
function previewSize(source: { width: number; height: number }): string {
  const height = even((PREVIEW_WIDTH * source.height) / source.width);
  if (height <= PREVIEW_MAX_HEIGHT) return `${PREVIEW_WIDTH}:${height}`;
  return `${even((PREVIEW_MAX_HEIGHT * source.width) / source.height)}:${PREVIEW_MAX_HEIGHT}`;
}

/** Turns a probed source into streamable renditions and its pictures, in an output directory. */
export class Transcoder {
  constructor(private readonly tools: MediaTools) {}

  /**
   * What the source holds, without its audio streams that carry no packets at all (declared, never
   * written: a broadcast recording's, a default track left empty). Such a track failed the whole
   * run only once ffmpeg reached the source's end (a 120 s source took a second run, 272-331 s
   * against 130) and took a place among the tracks offered. The packets are counted in the same
   * reading as the header, without decoding (one ffprobe, not two: about 60 ms per video).
   */
  async probe(source: string): Promise<ProbeResult> {
    const reading = await this.#read(source, SOURCE_READING);
    // Sound that begins further in than the analysis reaches has no rate or channels yet: it was
    // left out, and the video made silent without a reason (QA of session 51: a transport stream's
    // sound 8 s in). Such a source is read further, and every run reads it so.
    if (!reading.soundNotAnalyzed) return reading;
    // Only as far as the analysis: the first reading read the whole file, and found which streams
    // carry no packets at all.
    const further = await unlessInputFails(
      this.tools.probe(source, {
        inputOptions: [...SOURCE_READING, ...FURTHER_ANALYSIS],
        audioTaken: (stream) => !reading.audioWithoutPackets.includes(stream),
      }),
      undefined,
    );
    return further ?? reading;
  }

  /** The source's header and packets in one reading; its header alone when ffprobe cannot count. */
  async #read(source: string, inputOptions: readonly string[]): Promise<ProbeResult> {
    const counted = await unlessInputFails(
      this.tools.probe(source, { inputOptions, countPackets: true }),
      undefined,
    );
    // A count ffprobe cannot make tells nothing: the source is taken as its header reads.
    return counted ?? this.tools.probe(source, { inputOptions });
  }

  /**
   * Every output of the video from one ffmpeg process that decodes the source once: the HLS ladder
   * (one encoder per rung, fed by a `split` filter), the thumbnails and the animated preview. The
   * MP4 is then the top rung (at most 720p) copied into an MP4 container, not encoded again.
   * The rungs' media playlists grow segment by segment (`EVENT`), so the lowest rung plays while
   * the ladder is still being encoded; each becomes `VOD` once complete. `playableS` is the length
   * of the MP4 made. `signal` ends its ffmpeg runs (`ToolsCancelledError`): the video was deleted.
   */
  async transcode(
    source: string,
    outDir: string,
    probe: ProbeResult,
    thumbnailCount: number,
    signal?: AbortSignal,
  ): Promise<Transcoded> {
    try {
      return await this.#transcode(source, outDir, probe, thumbnailCount, signal);
    } catch (error) {
      if (!isInputFailure(error)) throw error;
      let failure: unknown = error;
      for (const reading of await this.#readingsForAnotherRun(source, probe, signal)) {
        await rm(outDir, { recursive: true, force: true });
        try {
          const made = await this.#transcode(source, outDir, reading, thumbnailCount, signal);
          return { ...made, tracksLeftOut: error.message };
        } catch (again) {
          if (!isInputFailure(again)) throw again;
          failure = again;
        }
      }
      throw failure;
    }
  }

  /**
   * The readings of the source to make it from again, in turn, after a run with all its sound failed.
   * The other audio tracks were never needed before they were offered: no video fails for one.
   * - Each track is tried alone, briefly, as the run encodes it: those ffmpeg fails on (a decoder
   *   or a mix-down it lacks) are left out, and the source read again without them, so the next
   *   track leads and the hold is its own; with none left, none is made.
   * - Then, if tracks remain beside the lead, the lead alone: data ffmpeg chokes on further in.
   */
  async #readingsForAnotherRun(
    source: string,
    probe: ProbeResult,
    signal?: AbortSignal,
  ): Promise<ProbeResult[]> {
    const tracks = probe.audioTracks;
    if (tracks.length === 0) return [];
    const usable = new Set<number>();
    for (const track of tracks)
      if (await this.#encodes(source, probe.inputOptions, track.stream, signal)) usable.add(track.stream);
    // No sound ffmpeg can encode at all: the video fails with the reason, rather than go silent.
    if (usable.size === 0) return [];
    let reading: ProbeResult | undefined = probe;
    const readings: ProbeResult[] = [];
    if (usable.size < tracks.length) {
      // A reading that fails tells nothing: the first run's failure is what the video fails with.
      reading = await unlessInputFails(
        this.tools.probe(source, {
          inputOptions: probe.inputOptions,
          audioTaken: (stream) => usable.has(stream),
        }),
        undefined,
      );
      if (reading) readings.push(reading);
    }
    if (reading && reading.audioTracks.length > 1)
      readings.push({ ...reading, audioTracks: reading.audioTracks.slice(0, 1) });
    return readings;
  }

  /** Whether ffmpeg encodes the first seconds of one audio track as a run would. */
  #encodes(
    source: string,
    inputOptions: readonly string[],
    stream: number,
    signal?: AbortSignal,
  ): Promise<boolean> {
    const check = [...encodedAudio(stream), "-t", String(TRACK_CHECK_S), "-f", "null", "-"];
    return unlessInputFails(
      this.tools.ffmpeg([...sourceInput(source, inputOptions), ...check], signal).then(() => true),
      false,
    );
  }

  /** One ffmpeg run of every output, with `probe.audioTracks` as the sound, and what follows it. */
  async #transcode(
    source: string,
    outDir: string,
    probe: ProbeResult,
    thumbnailCount: number,
    signal?: AbortSignal,
  ): Promise<Transcoded> {
    const rungs = ladderFor(Math.min(probe.width, probe.height)).map((rung) => ({
      ...rung,
      ...rungDimensions(probe, rung.size),
      directory: `${rung.size}p`,
    }));
    for (const rung of rungs) await mkdir(join(outDir, rung.directory), { recursive: true });
    await mkdir(join(outDir, THUMBNAIL_DIR), { recursive: true });

    const thumbnailHeight = Math.min(THUMBNAIL_HEIGHT, evenAtMost(probe.height));
    const graph = [
      `[0:v]${pictureTiming(probe)}${probe.hdr ? `${toneMapping(probe.hdr)},` : ""}split=${rungs.length + 2}${rungs.map((_, index) => `[in${index}]`).join("")}[inthumbs][inpreview]`,
      // Square pixels out: the sizes already carry the source's shown aspect ratio.
      ...rungs.map((rung, index) => `[in${index}]scale=${rung.width}:${rung.height},setsar=1[rung${index}]`),
      `[inthumbs]${thumbnailFrames(probe, thumbnailCount)},setpts=N/TB,scale=${scaledWidth(probe, thumbnailHeight)}:${thumbnailHeight},setsar=1[thumbs]`,
      `[inpreview]trim=duration=${Math.min(PREVIEW_SECONDS, probe.durationS)},fps=${PREVIEW_FPS}:eof_action=pass,scale=${previewSize(probe)},setsar=1[preview]`,
    ].join(";");
    const [lead, ...alternates] = probe.audioTracks;
    const audio = lead ? soundOf(lead.stream, probe) : [];
    // HLS outputs of one process, growing as `EVENT` playlists until complete (a rung's or a track's).
    const hlsOutput = (directory: string) => [
      // Every output on one timeline: a muxer moves an output whose encoders start before zero (a
      // rung's B-frames: two frames, 4 s at 0.5 fps; AAC's priming: 0.02 s) to start at zero, each
      // by its own delay, which put an audio-only track 57 ms (at 0.5 fps, 4 s) ahead of the rungs'
      // picture. Started later than any such delay, no output is moved.
      "-output_ts_offset",
      String(timelineLeadS(probe.frameRate)),
      "-f",
      "hls",
      "-hls_time",
      String(SEGMENT_S),
      "-hls_playlist_type",
      "event",
      "-hls_segment_filename",
      join(outDir, directory, "segment_%03d.ts"),
      join(outDir, directory, "index.m3u8"),
    ];
    // The other audio tracks: audio-only renditions the master offers beside the rungs' own sound.
    const otherTracks = alternates.map((track) => ({ ...track, directory: audioDirectory(track) }));
    for (const track of otherTracks) await mkdir(join(outDir, track.directory), { recursive: true });
    await this.tools.ffmpeg(
      [
        ...sourceInput(source, probe.inputOptions),
        "-filter_complex",
        graph,
        ...rungs.flatMap((rung, index) => [
          "-map",
          `[rung${index}]`,
          "-c:v",
          "libx264",
          "-profile:v",
          "high",
          "-level:v",
          (levelFor(rung.width, rung.height, probe.frameRate) / 10).toFixed(1),
          "-preset",
          "veryfast",
          "-pix_fmt",
          "yuv420p",
          ...(probe.hdr ? SDR_TAGS : []),
          "-b:v",
          `${rung.videoKbps}k`,
          "-maxrate",
          `${Math.round(rung.videoKbps * 1.2)}k`,
          "-bufsize",
          `${rung.videoKbps * 2}k`,
          "-force_key_frames",
          `expr:gte(t,n_forced*${SEGMENT_S})`,
          ...audio,
          // Sound and picture interleaved even with up to a minute between the source's frames
          // (ffmpeg's default waits 10 s): a recording of a still screen had its sound written up to
          // a minute ahead, into the wrong segments (each no longer stood alone), and the MP4's copy
          // found no picture ("dimensions not set", QA of session 48). The sound waits in memory.
          "-max_interleave_delta",
          String(INTERLEAVE_WAIT_S * 1_000_000),
          ...hlsOutput(rung.directory),
        ]),
        // Each ends with the video: a commentary that ran on past it was encoded, and offered, whole.
        ...otherTracks.flatMap((track) => [
          ...soundOf(track.stream, probe),
          "-t",
          probe.durationS.toFixed(3),
          ...hlsOutput(track.directory),
        ]),
        // One picture per second of `setpts=N/TB`: the selected frames, none repeated.
        "-map",
        "[thumbs]",
        "-r",
        "1",
        "-q:v",
        "4",
        join(outDir, THUMBNAIL_DIR, "thumbnail_%03d.jpg"),
        "-map",
        "[preview]",
        // The trim alone does not end the branch: the fps filter repeats the last frame up to the
        // source's end (a 2-hour source's preview grew past 5 GB in ffmpeg's memory).
        "-frames:v",
        String(PREVIEW_SECONDS * PREVIEW_FPS),
        "-c:v",
        "libwebp",
        "-quality",
        "60",
        "-loop",
        "0",
        join(outDir, PREVIEW_FILE),
      ],
      signal,
    );

    const completed = async (directory: string) => {
      const playlist = join(outDir, directory, "index.m3u8");
      const text = await readFile(playlist, "utf8");
      await writeFile(playlist, text.replace("#EXT-X-PLAYLIST-TYPE:EVENT", "#EXT-X-PLAYLIST-TYPE:VOD"));
    };
    const others: AudioRendition[] = [];
    for (const track of otherTracks) {
      await completed(track.directory);
      const rendition = { ...track, ...(await this.#bandwidth(outDir, track.directory, probe.durationS)) };
      // A track whose data decoded to (next to) nothing, or none at all, is not offered: picking it
      // froze hls.js for good (QA of session 49: a declared track without packets, a corrupt one).
      if (rendition.playedS >= MIN_AUDIO_RENDITION_S && rendition.averageBandwidth > 0)
        others.push(rendition);
      else await rm(join(outDir, track.directory), { recursive: true, force: true });
    }
    const renditions: Rendition[] = [];
    for (const rung of rungs) {
      await completed(rung.directory);
      renditions.push({
        height: rung.height,
        width: rung.width,
        codecs: highProfileCodec(levelFor(rung.width, rung.height, probe.frameRate)),
        playlist: `${rung.directory}/index.m3u8`,
        ...bandwidthOf(await this.#bandwidth(outDir, rung.directory, probe.durationS)),
      });
    }

    const mp4Rung = rungs.find((rung) => rung.size <= MP4_MAX_SIZE) ?? rungs[rungs.length - 1];
    const mp4 = join(outDir, MP4_FILE);
    const copyToMp4 = this.tools.ffmpeg(
      [
        "-i",
        join(outDir, mp4Rung?.directory ?? "", "index.m3u8"),
        "-map",
        "0",
        "-c",
        "copy",
        ...(lead ? ["-bsf:a", "aac_adtstoasc"] : []),
        "-movflags",
        "+faststart",
        mp4,
      ],
      signal,
    );
    // Two files, read at once when the node has a tool slot free (one video in work): about 60 ms.
    const [playableS, timelineStartPts] = await settledTogether(
      // What was decoded, which a truncated source's header overstates.
      copyToMp4.then(async () => (await this.tools.probe(mp4)).durationS),
      // Not 0: the MPEG-TS muxer starts at 1.4 s, and B-frames add their delay. Every rung is cut
      // from one decode, so the first rung's start is every rung's.
      this.tools.firstVideoPts(join(outDir, rungs[0]?.directory ?? "", "segment_000.ts")),
    );
    const thumbnailScale = `${deinterlacing(probe)}${probe.hdr ? `${toneMapping(probe.hdr)},` : ""}scale=${scaledWidth(probe, thumbnailHeight)}:${thumbnailHeight}`;
    return {
      renditions,
      audio: { lead, others },
      durationS: probe.durationS,
      thumbnails: await this.#thumbnails(source, probe.inputOptions, outDir, thumbnailScale, thumbnailCount),
      playableS,
      timelineStartPts,
    };
  }

  /** The master playlist; written last, when every rendition it lists is complete. */
  async package(outDir: string, renditions: Rendition[], audio: AudioRenditions): Promise<void> {
    await writeFile(join(outDir, MASTER_PLAYLIST), masterPlaylist(renditions, audio));
  }

  /**
   * The `count` thumbnail names. A source whose last frame comes before the last slice's middle (a
   * few frames long, or a very low frame rate) yields fewer pictures: the last one made stands in for
   * the missing ones, and the first frame when none was made (a single-frame video).
   */
  async #thumbnails(
    source: string,
    inputOptions: readonly string[],
    outDir: string,
    scale: string,
    count: number,
  ): Promise<string[]> {
    const names = Array.from(
      { length: count },
      (_, index) => `${THUMBNAIL_DIR}/thumbnail_${String(index + 1).padStart(3, "0")}.jpg`,
    );
    const made = async () => {
      const files = new Set(await readdir(join(outDir, THUMBNAIL_DIR)));
      return names.filter((name) => files.has(name.slice(THUMBNAIL_DIR.length + 1)));
    };
    let present = await made();
    if (present.length === 0) {
      await this.tools.ffmpeg([
        ...sourceInput(source, inputOptions),
        "-frames:v",
        "1",
        "-vf",
        scale,
        "-q:v",
        "4",
        join(outDir, names[0] ?? ""),
      ]);
      present = await made();
    }
    const last = present[present.length - 1];
    if (!last) throw new MediaToolError("the video has no frame to take a thumbnail from");
    for (const name of names.slice(present.length)) await copyFile(join(outDir, last), join(outDir, name));
    return names;
  }

  /** Peak and average bits per second of a rendition, measured from its segments. */
  async #bandwidth(outDir: string, directory: string, durationS: number) {
    const text = await readFile(join(outDir, directory, "index.m3u8"), "utf8");
    const durations = [...text.matchAll(/#EXTINF:([\d.]+)/g)].map((match) => Number(match[1]));
    const segments = (await readdir(join(outDir, directory))).filter((name) => name.endsWith(".ts")).sort();
    let peak = 0;
    let totalBits = 0;
    for (const [index, name] of segments.entries()) {
      const bits = (await stat(join(outDir, directory, name))).size * 8;
      totalBits += bits;
      peak = Math.max(peak, bits / Math.max(durations[index] ?? SEGMENT_S, 0.1));
    }
    const playedS = durations.reduce((sum, value) => sum + value, 0);
    // Under 0.1 s of video (one frame) the peak is measured over 0.1 s; the average may not pass it.
    const average = Math.min(peak, totalBits / (playedS || durationS));
    return { bandwidth: Math.round(peak), averageBandwidth: Math.round(average), playedS };
  }
}

/** How tone-mapped renditions are tagged: BT.709, what the tone mapping made. */
const SDR_TAGS = ["-color_primaries", "bt709", "-color_trc", "bt709", "-colorspace", "bt709"];

/**
 * Filters turning HDR pictures into the BT.709 SDR ones 8-bit H.264 renditions can carry (players
 * show an untouched PQ or HLG picture washed out and dim). The source's primaries and matrix are
 * taken as BT.2020, as HDR video's are, since they are often left untagged; its range as tagged.
 */
export function toneMapping(hdr: { transfer: HdrTransfer; fullRange: boolean }): string {
  const source = `tin=${hdr.transfer}:pin=2020:min=2020_ncl:rin=${hdr.fullRange ? "pc" : "tv"}`;
  return [
    `zscale=${source}:t=linear:npl=100:p=2020`,
    "format=gbrpf32le",
    "zscale=p=709",
    "tonemap=hable:desat=0",
    "zscale=t=709:m=709:r=tv",
    "format=yuv420p",
  ].join(",");
}

/**
 * A `select` expression taking, for each of `count` equal slices of the video, the first frame at
 * or after the slice's middle (`prev_t` is NaN on the first frame, so `not(gte(...))` admits it).
 */
export function thumbnailSelection(durationS: number, count: number): string {
  return Array.from({ length: count }, (_, index) => {
    const at = ((durationS * (index + 0.5)) / count).toFixed(3);
    return `gte(t,${at})*not(gte(prev_t,${at}))`;
  }).join("+");
}

/** How an audio track of the source is encoded: stereo AAC, in the rungs and in an audio rendition alike. */
const encodedAudio = (stream: number) => [
  "-map",
  `0:${stream}`,
  "-c:a",
  "aac",
  "-b:a",
  `${AUDIO_KBPS}k`,
  "-ac",
  "2",
];
/**
 * A track as the renditions carry it; one whose sound begins late, with silence from the video's
 * start up to it. hls.js cannot play a rendition whose first segment has no sound and a later one
 * has ("Attempting to append to the audio SourceBuffer, but it does not exist": fatal, QA of session
 * 51), and an audio-only rendition beginning late listed 4 s of a 16 s video. Only for such a track:
 * ffmpeg starts its filter anew where a source's sound changes its rate or channels (a broadcast
 * recording's, at an advertisement), and the filter then filled the time from the start again, 6 s
 * of silence put in the middle of a 12 s source. Sound further in than the interleaving wait
 * (`-max_interleave_delta`) is not taken at all (`MAX_SOUND_START_S`).
 */
const soundOf = (stream: number, probe: ProbeResult) =>
  probe.lateSound.includes(stream)
    ? [...encodedAudio(stream), "-af", "aresample=first_pts=0"]
    : encodedAudio(stream);
/** Seconds of a track encoded to tell whether ffmpeg can encode it at all, after a failed run. */
const TRACK_CHECK_S = 2;

/**
 * ffmpeg or ffprobe failed on the source, within its time: a run so failed is made again with less
 * sound (one past its timeout is not made twice), and a reading so failed tells nothing. Anything
 * else (the process stopping, the video deleted) goes up as it is.
 */
const isInputFailure = (error: unknown): error is MediaToolError =>
  error instanceof MediaToolError && !(error instanceof ToolTimedOutError);

/** What `work` gives, or `fallback` when ffmpeg or ffprobe failed on the source. */
const unlessInputFails = <T>(work: Promise<T>, fallback: T): Promise<T> =>
  work.catch((error: unknown) => {
    if (isInputFailure(error)) return fallback;
    throw error;
  });

/** Both results, once both have settled: neither tool outlives the run, which then removes its files. */
async function settledTogether<A, B>(first: Promise<A>, second: Promise<B>): Promise<[A, B]> {
  const [a, b] = await Promise.allSettled([first, second]);
  if (a.status === "rejected") throw a.reason;
  if (b.status === "rejected") throw b.reason;
  return [a.value, b.value];
}

/** What a transcode made, for packaging and the video's record. */
export interface Transcoded {
  renditions: Rendition[];
  audio: AudioRenditions;
  /** Why some of the source's audio tracks were left out: the first run, with them all, failed so. */
  tracksLeftOut?: string;
  /** The source's length as the run read it: without a track ffmpeg failed on, the hold may differ. */
  durationS: number;
  thumbnails: string[];
  playableS: number;
  timelineStartPts: number | undefined;
}

/** Peak and average bits a second of a rendition's segments, as the master states them. */
interface Bandwidth {
  bandwidth: number;
  averageBandwidth: number;
}
const bandwidthOf = ({ bandwidth, averageBandwidth }: Bandwidth): Bandwidth => ({
  bandwidth,
  averageBandwidth,
});

/** An audio track other than the rungs' own, made into its own rendition. */
export interface AudioRendition extends AudioTrack, Bandwidth {}

/** The sound a master offers: the rungs' own track, and the others a player may switch to. */
export interface AudioRenditions {
  lead: AudioTrack | undefined;
  others: AudioRendition[];
}

/** Shorter audio renditions are taken for tracks that held nothing playable, and not offered. */
const MIN_AUDIO_RENDITION_S = 0.5;

/** Seconds every HLS output starts after the source's zero: past an encoder's delay of a few frames. */
const timelineLeadS = (frameRate: number): number => Math.max(1, Math.ceil(4 / frameRate));

/** Where an audio track other than the rungs' own is written, by its stream in the source: `audio_2`. */
export const audioDirectory = (track: AudioTrack) => `audio_${track.stream}`;

const AUDIO_GROUP = "audio";

/**
 * The master playlist. With more than one audio track, each is an `EXT-X-MEDIA` of one group: the
 * first is the sound every rung carries (no `URI`), the others audio-only renditions a player may
 * switch to; players that know no groups play the rungs' sound as before.
 */
export function masterPlaylist(renditions: Rendition[], audio: AudioRenditions): string {
  const lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-INDEPENDENT-SEGMENTS"];
  // The group's first entry, when there is a group: the rungs' own sound.
  const groupLead = audio.others.length > 0 ? audio.lead : undefined;
  // A viewer on another track downloads it beside the rung, which carries its own sound all the same.
  const alternate = (of: (rendition: AudioRendition) => number) => Math.max(0, ...audio.others.map(of));
  if (groupLead) {
    for (const [position, track] of [groupLead, ...audio.others].entries()) {
      const attributes = [
        "TYPE=AUDIO",
        `GROUP-ID="${AUDIO_GROUP}"`,
        `NAME="${attributeText(track.name)}"`,
        ...(track.language ? [`LANGUAGE="${track.language}"`] : []),
        `DEFAULT=${position === 0 ? "YES" : "NO"}`,
        "AUTOSELECT=YES",
        'CHANNELS="2"',
        ...(position === 0 ? [] : [`URI="${audioDirectory(track)}/index.m3u8"`]),
      ];
      lines.push(`#EXT-X-MEDIA:${attributes.join(",")}`);
    }
  }
  for (const rendition of [...renditions].sort((a, b) => b.bandwidth - a.bandwidth)) {
    const codecs = audio.lead ? `${rendition.codecs},mp4a.40.2` : rendition.codecs;
    const bandwidth = rendition.bandwidth + alternate((other) => other.bandwidth);
    const average = rendition.averageBandwidth + alternate((other) => other.averageBandwidth);
    lines.push(
      `#EXT-X-STREAM-INF:BANDWIDTH=${bandwidth},AVERAGE-BANDWIDTH=${average},RESOLUTION=${rendition.width}x${rendition.height},CODECS="${codecs}"${groupLead ? `,AUDIO="${AUDIO_GROUP}"` : ""}`,
      rendition.playlist,
    );
  }
  return `${lines.join("\n")}\n`;
}
