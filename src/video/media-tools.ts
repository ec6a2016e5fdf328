import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { createRequire } from "node:module";
import { basename, delimiter, join } from "node:path";
import pLimit, { type LimitFunction } from "p-limit";
import { diskCannotWrite } from "../directories.ts";
import { attributeText } from "./playlists.ts";

export interface MediaToolPaths {
  ffmpeg: string;
  ffprobe: string;
}

function onPath(name: string): string | undefined {
  for (const directory of (process.env.PATH ?? "").split(delimiter)) {
    if (!directory) continue;
    const candidate = join(directory, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

function shipped(packageName: string): string | undefined {
  try {
    return (createRequire(import.meta.url)(packageName) as { path: string }).path;
  } catch {
    return undefined;
  }
}

/** The system's ffmpeg/ffprobe when on PATH, else the binaries shipped in npm packages. */
export function locateMediaTools(): MediaToolPaths {
  const ffmpeg = onPath("ffmpeg") ?? shipped("@ffmpeg-installer/ffmpeg");
  const ffprobe = onPath("ffprobe") ?? shipped("@ffprobe-installer/ffprobe");
  if (!ffmpeg || !ffprobe) throw new Error("ffmpeg and ffprobe were not found on PATH nor in node_modules");
  return { ffmpeg, ffprobe };
}

export class MediaToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MediaToolError";
  }
}

/** A tool ran past its timeout (`CUMULO_FFMPEG_TIMEOUT_S`) and was killed. */
export class ToolTimedOutError extends MediaToolError {
  constructor(message: string) {
    super(message);
    this.name = "ToolTimedOutError";
  }
}

/**
 * A tool could not write its output: the scratch disk is full, read-only or over quota. Nothing is
 * wrong with the input, and the run succeeds once there is room. The message names no path (it
 * may reach a customer as a failure reason); the cause has ffmpeg's own words.
 */
export class ScratchDiskError extends Error {
  constructor(cause: MediaToolError) {
    super("the scratch disk of video processing is full or read-only", { cause });
    this.name = "ScratchDiskError";
  }
}

/** Why a process cannot start that the machine's state explains: descriptors, processes, memory. */
const OUT_OF_RESOURCES = new Set(["EMFILE", "ENFILE", "EAGAIN", "ENOMEM"]);

/**
 * A tool could not start for want of the machine's resources (file descriptors, processes,
 * memory): nothing is wrong with the input, and a job waits it out.
 */
export class ToolStartError extends Error {
  constructor(
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
    this.name = "ToolStartError";
  }
}

/** A run ended because its caller no longer wants it (its video was deleted or given a newer source). */
export class ToolsCancelledError extends Error {
  constructor() {
    super("the media tool run was cancelled: its work is no longer wanted");
    this.name = "ToolsCancelledError";
  }
}

/** A tool ended because the process is stopping: nothing is wrong with the input. */
export class ToolsStoppedError extends Error {
  constructor() {
    super("the media tools were stopped: this process is shutting down");
    this.name = "ToolsStoppedError";
  }
}

export interface ProbeResult {
  durationS: number;
  width: number;
  height: number;
  /** Frames a second of the renditions: the source's own rate, unless `renditionRate` sets one. */
  frameRate: number;
  /**
   * The rate (an ffmpeg `fps` value) the renditions are conformed to, when the source's own would
   * not do: above 60 frames a second, or a variable rate counted in a clock's ticks (a browser
   * recording's 1000/1, which ffmpeg would otherwise fill with copies of each frame).
   */
  renditionRate: string | undefined;
  /**
   * The audio tracks ffmpeg can encode, at most `MAX_AUDIO_TRACKS`; none for a source without sound.
   * The first, the one marked default (else the first), is the sound every rung carries; the others
   * (other languages, commentary) become audio-only renditions a player may switch to.
   */
  audioTracks: AudioTrack[];
  /** Seconds the sound runs on past the last frame, which renditions hold that frame for (0: none). */
  holdLastFrameS: number;
  videoCodec: string;
  /** H.264 profile and level as ffprobe names them, for the HLS CODECS attribute. */
  profile: string | undefined;
  level: number | undefined;
  /** High dynamic range: the transfer curve (PQ or HLG) that renditions must be tone-mapped from. */
  hdr: { transfer: HdrTransfer; fullRange: boolean } | undefined;
  /** Each frame holds two fields taken at different moments (broadcast, camcorders): deinterlaced first. */
  interlaced: boolean;
  /** The options the file was read with: every run on it reads it so, to find the same streams. */
  inputOptions: readonly string[];
  /**
   * Sound may begin further in than the analysis reached. Known only when packets were counted:
   * an audio stream carries packets whose rate or channels the reading did not reach (it was not
   * taken), or sound was taken from a container that states no stream's start (reading every packet
   * learns the rate of an MP2 or AC-3 track beginning past the analysis, and Matroska states it in
   * its header, but neither tells where the sound begins).
   */
  soundNotAnalyzed: boolean;
  /**
   * The audio tracks taken whose sound begins more than `LATE_SOUND_S` after the source starts, as
   * far as the reading knows where each begins (`soundNotAnalyzed`).
   */
  lateSound: number[];
  /** The audio streams none of whose packets the reading found (only when packets were counted). */
  audioWithoutPackets: number[];
}

/** One audio track as a player lists it. */
export interface AudioTrack {
  stream: number;
  /** A BCP 47 tag (`en` for the file's `eng`); undefined when the file names none, `und`, or no known language. */
  language: string | undefined;
  /** The track's title, else its language's English name, else `Audio 2`; unique among the tracks. */
  name: string;
}

/** Audio tracks offered at most: each one more costs an AAC encode and its segments. */
export const MAX_AUDIO_TRACKS = 8;

/** ffprobe's `field_order` of interlaced video: top or bottom field first, coded and shown. */
const INTERLACED_FIELD_ORDERS = new Set(["tt", "bb", "tb", "bt"]);

/** The HDR transfer curves, as ffprobe names them: PQ (HDR10, Dolby Vision) and HLG. */
const HDR_TRANSFERS = ["smpte2084", "arib-std-b67"] as const;
export type HdrTransfer = (typeof HDR_TRANSFERS)[number];
const isHdrTransfer = (transfer: string | undefined): transfer is HdrTransfer =>
  (HDR_TRANSFERS as readonly (string | undefined)[]).includes(transfer);

export interface ProbeStream {
  index?: number;
  codec_type?: string;
  codec_name?: string;
  width?: number;
  height?: number;
  duration?: string;
  start_time?: string;
  profile?: string;
  level?: number;
  avg_frame_rate?: string;
  r_frame_rate?: string;
  /** `num:den`, the shape of one pixel (anamorphic video stretches its pixels). */
  sample_aspect_ratio?: string;
  color_transfer?: string;
  /** `tv` (limited) or `pc` (full). */
  color_range?: string;
  sample_rate?: string;
  channels?: number;
  /** Audio's named layout (`stereo`, `5.1(side)`); absent when the file names none. */
  channel_layout?: string;
  /** `progressive`, or the order of an interlaced frame's two fields (`tt`, `bb`, `tb`, `bt`). */
  field_order?: string;
  disposition?: { attached_pic?: number; default?: number };
  /** Matroska's statistics (`DURATION`, `_STATISTICS_TAGS`) among them, named as the file names them. */
  tags?: { rotate?: string; language?: string; title?: string; [name: string]: string | undefined };
  side_data_list?: { rotation?: number }[];
  /** With `-count_packets`; absent for a stream none was read of. */
  nb_read_packets?: string;
}

/** How `MediaTools.probe` reads a file. */
export interface ProbeReading {
  inputOptions?: readonly string[];
  audioTaken?: (stream: number) => boolean;
  countPackets?: boolean;
}

export interface ProbeJson {
  format?: { duration?: string; start_time?: string; format_name?: string };
  streams?: ProbeStream[];
}

/** The highest rate renditions keep, as video platforms do: a 120 or 240 fps source is played at 60. */
const MAX_FRAME_RATE = 60;
/** The rate a variable rate counted in a clock's ticks is conformed to, unless its frames come faster. */
const CONFORMED_FRAME_RATE = 30;
/** How far apart a stream's base and average rates may be and it still counts as constant. */
const CONSTANT_RATE_TOLERANCE = 0.02;

/**
 * The largest picture a source may have: H.264's largest frame (level 6.2, 139264 macroblocks, e.g.
 * 8192x4352, 8K with room). A larger one takes over a gigabyte per decoded frame in ffmpeg, and a
 * file of a few kilobytes can declare it.
 */
const MAX_SOURCE_PIXELS = 139_264 * 16 * 16;

/**
 * The containers a source is read as: ffmpeg's demuxers that read the one file they are given. Left
 * to guess, ffmpeg reads a text file as an HLS playlist or a concat list and follows it to other
 * files of the machine (another organization's renditions transcoded into the uploader's video,
 * docs/security.md); those, DASH, SDP and the other demuxers that open more than their file are not
 * listed. `mov` is MP4 and QuickTime, `matroska` also WebM.
 */
const SOURCE_DEMUXERS = [
  "mov",
  "matroska",
  "avi",
  "mpegts",
  "mpeg",
  "flv",
  "asf",
  "ogg",
  "mxf",
  "dv",
  "nut",
  "ivf",
  "obu",
  "h264",
  "hevc",
  "m4v",
  "mpegvideo",
  "yuv4mpegpipe",
  "gif",
  // Audio alone, to be told it holds no video.
  "mp3",
  "aac",
  "flac",
  "wav",
].join(",");

/** ffmpeg's words for a source it found in a demuxer `SOURCE_DEMUXERS` leaves out: `[hls @ 0x...] Format not on whitelist`. */
const NOT_ON_WHITELIST = /\[([\w,]+) @ [^\]]*\] Format not on whitelist/;

/** ffmpeg's last words when something before them failed: they name no cause by themselves. */
const WRAP_UP =
  /^(Error marking filters as finished|Error initializing output stream|Error while (filtering|processing the decoded data)|Conversion failed)/;

/**
 * Why a tool failed, from its error output: its last line, after the line before it when the last
 * only wraps up ("Error marking filters as finished" of a picture that could not be decoded).
 * ffmpeg's component prefixes lose their memory addresses (`[h264 @ 0x55d1c...]`).
 */
export function failureReason(stderr: string): string {
  const lines = stderr
    .split("\n")
    .map((line) =>
      line
        .replace(/^\[([\w,]+) @ 0x[0-9a-f]+\] /, "$1: ")
        .replace(/\s*--\s*$/, "")
        .trim(),
    )
    .filter((line) => line !== "");
  const last = lines.at(-1) ?? "";
  const before = lines.findLast((line) => line !== last);
  return WRAP_UP.test(last) && before !== undefined ? `${before} (${last})` : last;
}

/** Options before an uploaded source, so that it is read from its file alone, as a listed container. */
export const SOURCE_READING: readonly string[] = [
  "-protocol_whitelist",
  "file",
  "-format_whitelist",
  SOURCE_DEMUXERS,
];

/**
 * Sound beginning later than this after the picture is not taken: the renditions carry silence up
 * to a track's first sound, and their muxers wait at most a minute for it, the picture held back
 * meanwhile (the transcoder's `-max_interleave_delta`); past that the picture was written alone and
 * the sound came after it, and a Matroska file's failed the MP4's copy.
 */
export const MAX_SOUND_START_S = 50;

/**
 * Containers that state no stream's start: where each begins is known only from the analysis, which
 * reads the first 5 s (MPEG-TS, MPEG-PS, Matroska and WebM, ffprobe's names for them).
 */
const STARTS_UNSTATED = new Set(["mpegts", "mpeg", "matroska,webm"]);

/** Sound beginning this long after the source's start is late: no longer within a rung's first segment. */
export const LATE_SOUND_S = 1;

/**
 * Added to `SOURCE_READING` for a source whose sound begins further in than ffmpeg's analysis of its
 * first 5 s reaches (a broadcast capture's, 8 s in): up to a minute of it, or 100 MB. Only for such
 * a source: every stream's packets are held in memory while the analysis reads them.
 */
export const FURTHER_ANALYSIS: readonly string[] = [
  "-analyzeduration",
  "60000000",
  "-probesize",
  "100000000",
];

/** ffmpeg's input arguments for an uploaded source (`-i file`), read as its probe was (`inputOptions`). */
export const sourceInput = (file: string, inputOptions: readonly string[]): string[] => [
  ...inputOptions,
  "-i",
  file,
];

/** A rate as ffprobe writes it (`num/den` frames a second); undefined when it is none (`0/0`). */
function rateOf(rate: string | undefined): { num: number; den: number } | undefined {
  const [num, den] = (rate ?? "").split("/").map(Number);
  return num && den && num / den > 0 ? { num, den } : undefined;
}

/**
 * The renditions' frame rate. A constant rate is kept, halved (or more) past 60. A variable one is
 * kept when its base is a real rate of at most 60 (ffmpeg fills the gaps at that rate, as the level
 * declares). One counted in a clock's ticks (a base past 60: a browser recording's 1000/1) is
 * conformed to 30 fps, or 60 when its frames come faster on average: a screen recording's frames
 * come in bursts, and its average (3 fps, or 0.05 for a still screen) dropped most of a burst's and
 * left too few frames for the MP4's copy to find the picture's size (QA of session 48).
 */
function renditionRateOf(
  base: { num: number; den: number } | undefined,
  average: number | undefined,
): Pick<ProbeResult, "frameRate" | "renditionRate"> {
  const baseRate = base && base.num / base.den;
  const constant =
    baseRate !== undefined &&
    average !== undefined &&
    Math.abs(baseRate - average) <= baseRate * CONSTANT_RATE_TOLERANCE;
  if (base && baseRate !== undefined && (constant || baseRate <= MAX_FRAME_RATE)) {
    const divisor = Math.ceil(baseRate / MAX_FRAME_RATE);
    if (divisor === 1) return { frameRate: baseRate, renditionRate: undefined };
    return { frameRate: baseRate / divisor, renditionRate: `${base.num}/${base.den * divisor}` };
  }
  const rate = (average ?? 0) > CONFORMED_FRAME_RATE ? MAX_FRAME_RATE : CONFORMED_FRAME_RATE;
  return { frameRate: rate, renditionRate: String(rate) };
}

/** Seconds from a stream's start, ffprobe's `N/A` (or nothing) as undefined. */
const secondsOf = (value: string | undefined): number | undefined => {
  const seconds = Number(value);
  return value !== undefined && value !== "" && Number.isFinite(seconds) ? seconds : undefined;
};

/** ISO 639 codes that name no language (undetermined, several, none, uncoded, private use). */
const NO_LANGUAGE = /^(und|mul|zxx|mis|q[a-t][a-z])$/i;
const LANGUAGE_NAMES = new Intl.DisplayNames(["en"], { type: "language", fallback: "none" });

/**
 * A file's language tag (MP4 and Matroska write ISO 639-2, `eng`) as BCP 47, which HLS wants (`en`);
 * undefined for a tag that is no known language (`abcde`).
 */
function languageOf(tag: string | undefined): string | undefined {
  if (!tag || NO_LANGUAGE.test(tag)) return undefined;
  try {
    const canonical = Intl.getCanonicalLocales(tag)[0];
    return canonical && LANGUAGE_NAMES.of(canonical) !== undefined ? canonical : undefined;
  } catch {
    return undefined;
  }
}

/** Channels up to which ffmpeg guesses a layout a file does not name (7.1), to mix down from. */
const GUESSED_LAYOUT_MAX_CHANNELS = 8;

/**
 * Whether ffmpeg can make stereo AAC of an audio stream: a codec it knows, a sample rate and
 * channels (a broadcast recording declares streams that carry nothing: 0 Hz, 0 channels), and a
 * layout to mix down from, named or guessed (a Blu-ray's 5.1 PCM in Matroska names none; ten
 * channels of PCM with none cannot be mixed down).
 */
const isEncodable = (stream: ProbeStream): boolean =>
  stream.codec_name !== undefined &&
  stream.codec_name !== "none" &&
  Number(stream.sample_rate) > 0 &&
  (stream.channels ?? 0) > 0 &&
  ((stream.channels ?? 0) <= GUESSED_LAYOUT_MAX_CHANNELS ||
    (stream.channel_layout ?? "unknown") !== "unknown");

/** The audio streams none of whose packets a counted reading found (ffprobe leaves out their count). */
const audioWithoutPacketsOf = (streams: ProbeStream[]): number[] =>
  streams
    .filter(
      (stream) => stream.codec_type === "audio" && !(Number.parseInt(stream.nb_read_packets ?? "", 10) > 0),
    )
    .flatMap((stream) => stream.index ?? []);

/** The streams beginning more than `MAX_SOUND_START_S` after the picture: their sound is never taken. */
function streamsBeginningTooLate(streams: ProbeStream[], video: ProbeStream): Set<number | undefined> {
  const pictureStart = secondsOf(video.start_time) ?? 0;
  return new Set(
    streams
      .filter((stream) => (secondsOf(stream.start_time) ?? pictureStart) - pictureStart > MAX_SOUND_START_S)
      .map((stream) => stream.index),
  );
}

/** The tracks whose sound begins more than `LATE_SOUND_S` after the file's start. */
function lateSoundOf(parsed: ProbeJson, tracks: AudioTrack[]): number[] {
  const fileStart = secondsOf(parsed.format?.start_time) ?? 0;
  const startOf = (track: AudioTrack) =>
    secondsOf(parsed.streams?.find((stream) => stream.index === track.stream)?.start_time);
  return tracks
    .filter((track) => (startOf(track) ?? fileStart) - fileStart > LATE_SOUND_S)
    .map((track) => track.stream);
}

/**
 * The audio tracks offered, of those ffmpeg can encode: the one marked default (else the first)
 * leads, as the renditions carry it; the others follow in the file's order.
 */
function audioTracksOf(streams: ProbeStream[], taken: (stream: number) => boolean): AudioTrack[] {
  const audio = streams.filter(
    (stream) =>
      stream.codec_type === "audio" &&
      stream.index !== undefined &&
      taken(stream.index) &&
      isEncodable(stream),
  );
  const lead = audio.find((stream) => stream.disposition?.default === 1) ?? audio[0];
  const ordered = lead ? [lead, ...audio.filter((stream) => stream !== lead)] : [];
  const names = new Set<string>();
  return ordered.slice(0, MAX_AUDIO_TRACKS).map((stream, position) => {
    const language = languageOf(stream.tags?.language);
    // As the playlist writes it: two titles told apart only by a quote must not come out as one name.
    const base = attributeText(
      stream.tags?.title?.trim() || (language && LANGUAGE_NAMES.of(language)) || `Audio ${position + 1}`,
    );
    let name = base;
    for (let copy = 2; names.has(name); copy++) name = `${base} (${copy})`;
    names.add(name);
    return { stream: stream.index as number, language, name };
  });
}

/** Where a source's picture and sound begin and end, in seconds of the file's timeline, as far as known. */
export interface Timeline {
  start: number | undefined;
  videoEnd: number | undefined;
  audioEnd: number | undefined;
  /** The container's own length; the streams' times are not taken past it (a header can claim 10 hours of sound). */
  containerS: number | undefined;
  averageRate: number | undefined;
}

/**
 * What a source's packets tell of its timeline when its header does not (browser recordings:
 * MediaRecorder's WebM has no length, per stream or whole): from ffprobe's
 * `stream_index,pts_time,duration_time` lines, read as they come. Kept whole, the text of a file of
 * 30 million tiny packets passed JavaScript's longest string and ended the node (QA of session 48).
 * A raw H.264 or HEVC stream (`.h264`, `.265`: no container) has no times at all, only each frame's
 * duration at its declared rate; its picture is then those durations end to end from 0, as ffmpeg
 * times it when it decodes.
 */
export class PacketTimeline {
  #rest = "";
  #start = Number.POSITIVE_INFINITY;
  #videoEnd = Number.NEGATIVE_INFINITY;
  #audioEnd = Number.NEGATIVE_INFINITY;
  #frames = 0;
  #firstFrame = Number.POSITIVE_INFINITY;
  #lastFrame = Number.NEGATIVE_INFINITY;
  /** Video packets without a time, and their durations' sum. */
  #untimedFrames = 0;
  #untimedS = 0;

  constructor(
    private readonly videoStream: number,
    private readonly audioStream: number | undefined,
  ) {}

  push(text: string): void {
    const lines = (this.#rest + text).split("\n");
    this.#rest = lines.pop() ?? "";
    for (const line of lines) this.#line(line);
  }

  finish(): Timeline {
    this.#line(this.#rest);
    this.#rest = "";
    if (this.#frames === 0 && this.#untimedS > 0) {
      this.#start = Math.min(this.#start, 0);
      this.#videoEnd = this.#untimedS;
      this.#frames = this.#untimedFrames;
      this.#firstFrame = 0;
      this.#lastFrame = this.#untimedS - this.#untimedS / this.#untimedFrames;
    }
    const known = (value: number) => (Number.isFinite(value) ? value : undefined);
    return {
      start: known(this.#start),
      videoEnd: known(this.#videoEnd),
      audioEnd: known(this.#audioEnd),
      containerS: undefined,
      // Frames between the first and the last one's start: one fewer intervals than frames.
      averageRate:
        this.#frames > 1 && this.#lastFrame > this.#firstFrame
          ? (this.#frames - 1) / (this.#lastFrame - this.#firstFrame)
          : undefined,
    };
  }

  #line(line: string): void {
    const [index, pts, duration] = line.split(",");
    const at = secondsOf(pts);
    const stream = Number(index);
    if (at === undefined) {
      const length = secondsOf(duration);
      if (stream === this.videoStream && length !== undefined && length > 0) {
        this.#untimedFrames += 1;
        this.#untimedS += length;
      }
      return;
    }
    const end = at + (secondsOf(duration) ?? 0);
    if (stream === this.videoStream) {
      this.#start = Math.min(this.#start, at);
      this.#videoEnd = Math.max(this.#videoEnd, end);
      this.#frames += 1;
      this.#firstFrame = Math.min(this.#firstFrame, at);
      this.#lastFrame = Math.max(this.#lastFrame, at);
    } else if (stream === this.audioStream) {
      this.#start = Math.min(this.#start, at);
      this.#audioEnd = Math.max(this.#audioEnd, end);
    }
  }
}

/** The timeline a source's header gives: its picture's and its sound's streams, and the container's length. */
export function timelineOfHeader(
  parsed: ProbeJson,
  video: ProbeStream,
  audio: ProbeStream | undefined,
): Timeline {
  const containerS = secondsOf(parsed.format?.duration ?? video.duration);
  const streams = audio ? [video, audio] : [video];
  let ends = streams.map(endOf);
  if (ends.includes(undefined)) ends = matroskaEnds(parsed, streams, containerS) ?? ends;
  const starts = streams.flatMap((stream, position) => {
    const start = ends[position] !== undefined ? secondsOf(stream.start_time) : undefined;
    return start === undefined ? [] : [start];
  });
  const average = rateOf(video.avg_frame_rate);
  return {
    start: starts.length > 0 ? Math.min(...starts) : undefined,
    videoEnd: ends[0],
    audioEnd: audio ? ends[1] : undefined,
    containerS,
    averageRate: average && average.num / average.den,
  };
}

/**
 * The streams' ends by Matroska's `DURATION` tags: when each has one, and the latest tag of every
 * stream (another track may run longer) ends with the file. Tags another tool left behind after
 * cutting the file would not. Matroska's own length is where its timestamps end (15 s for 5 s of
 * media from 10 s on), so either reading of the file's end is taken.
 */
function matroskaEnds(parsed: ProbeJson, streams: ProbeStream[], containerS: number | undefined) {
  const tagged = streams.map(taggedEndOf);
  if (containerS === undefined || tagged.includes(undefined)) return undefined;
  const latest = Math.max(...(parsed.streams ?? []).flatMap((stream) => taggedEndOf(stream) ?? []));
  const fileEnds = [containerS, (secondsOf(parsed.format?.start_time) ?? 0) + containerS];
  return fileEnds.some((end) => Math.abs(latest - end) <= TAGGED_END_TOLERANCE_S) ? tagged : undefined;
}

/** How far the latest stream end Matroska's tags give may be from the file's own end, and be taken. */
const TAGGED_END_TOLERANCE_S = 0.5;
/** A start this close to zero (a B-frame's delay) makes a `DURATION` tag an end or a length alike, for a hold. */
const AMBIGUOUS_START_S = 0.1;
const MATROSKA_DURATION_TAG = /^DURATION(-[a-z]{2,3})?$/i;
const MATROSKA_DURATION = /^(\d+):([0-5]\d):([0-5]\d(?:\.\d+)?)$/;

/** The value of the first tag whose name matches. */
const tagOf = (tags: Record<string, string | undefined> | undefined, name: RegExp): string | undefined =>
  Object.entries(tags ?? {}).find(([tag]) => name.test(tag))?.[1];

/**
 * Where a Matroska stream ends by its `DURATION` tag, for files that give no length per stream
 * otherwise. ffmpeg's muxer (OBS's recordings are its files) writes the stream's end there; mkvmerge
 * writes its length from its first frame, and lists the tag in `_STATISTICS_TAGS`. Neither says who
 * wrote the tag for sure: ffmpeg copies mkvmerge's statistics into a file it writes (its `DURATION`
 * then an end), and mkvmerge copies the `Lavf` encoder of its input. Where statistics are listed,
 * the two readings differ by the stream's start, so the tag is taken only for a stream that starts
 * at the file's zero, where they agree.
 */
function taggedEndOf(stream: ProbeStream): number | undefined {
  const [, hours, minutes, seconds] =
    MATROSKA_DURATION.exec(tagOf(stream.tags, MATROSKA_DURATION_TAG) ?? "") ?? [];
  if (hours === undefined) return undefined;
  const tagged = Number(hours) * 3600 + Number(minutes) * 60 + Number(seconds);
  const statistics = tagOf(stream.tags, /^_STATISTICS_TAGS(-[a-z]{2,3})?$/i) ?? "";
  if (!statistics.split(" ").includes("DURATION")) return tagged;
  const start = secondsOf(stream.start_time);
  return start !== undefined && Math.abs(start) <= AMBIGUOUS_START_S ? start + tagged : undefined;
}

/**
 * The source's length: from its first frame or sound to the end of its picture or sound, whichever
 * comes last, as the renditions hold them. An MP4 whose edit list starts everything 5 s in reads 9 s
 * long for 4 s of media (thumbnails were sliced over the 9), so the streams' own times come first,
 * never past the container's length; the container's length where the streams do not say.
 */
export function lengthOf(timeline: Timeline): number | undefined {
  const { start, videoEnd, audioEnd, containerS } = timeline;
  const ends = [videoEnd, audioEnd].filter((end) => end !== undefined);
  if (start === undefined || videoEnd === undefined) return containerS;
  const streamsS = Math.max(...ends) - start;
  return containerS === undefined ? streamsS : Math.min(streamsS, containerS);
}

/** Where a stream ends, in seconds of the file's timeline; undefined when the file does not say. */
function endOf(stream: ProbeStream | undefined): number | undefined {
  const start = secondsOf(stream?.start_time);
  const duration = secondsOf(stream?.duration);
  return start === undefined || duration === undefined ? undefined : start + duration;
}

/** Sound past the picture's end shorter than this is left as it is (a last audio frame's overhang). */
const HELD_PICTURE_MIN_S = 0.5;
/**
 * Longer than this, the sound past the picture is left as it is: ffmpeg learns where a stream ends
 * only at the file's end, so holding the last frame keeps every output waiting (and the sound in
 * memory) until then; 10 minutes of sound behind 2 s of picture wrote no segment for 10 minutes.
 * Reading the picture and the sound from two inputs of the file does not help: the held picture
 * then runs ahead of the sound, and each output's segments past a minute of it had no sound (QA of
 * session 49; the video stalled in hls.js).
 */
const HELD_PICTURE_MAX_S = 60;

/**
 * How long the sound runs on past the picture (a recording whose camera stopped first): HLS players
 * trust each segment's stated length, the picture's, and cut or stall on the rest, so renditions hold
 * the last frame until the sound ends. Within the source's length: a header claiming hours of sound
 * in a 6 s file made 10 hours of renditions.
 */
export function soundPastPictureS(timeline: Timeline, lengthS: number): number {
  const { start, videoEnd, audioEnd } = timeline;
  if (start === undefined || videoEnd === undefined || audioEnd === undefined) return 0;
  const past = Math.min(audioEnd, start + lengthS) - videoEnd;
  return past >= HELD_PICTURE_MIN_S && past <= HELD_PICTURE_MAX_S ? past : 0;
}

/**
 * The picture's size as it is shown: pixels stretched to their aspect ratio, then turned as the
 * rotation says (a phone's portrait video is stored landscape); ffmpeg turns it upright itself when
 * it transcodes, so renditions are sized from this.
 */
function displaySize(video: ProbeStream, width: number, height: number): { width: number; height: number } {
  const [num, den] = (video.sample_aspect_ratio ?? "1:1").split(":").map(Number);
  const shownWidth = num && den ? Math.max(1, Math.round((width * num) / den)) : width;
  const rotation = Number(
    video.side_data_list?.find((data) => data.rotation !== undefined)?.rotation ?? video.tags?.rotate ?? 0,
  );
  return Math.abs(rotation) % 180 === 90
    ? { width: height, height: shownWidth }
    : { width: shownWidth, height };
}

const STDERR_KEPT = 16 * 1024;

/** strerror's words for ENOSPC, EROFS and EDQUOT (glibc's, musl's and the BSDs' spellings), as ffmpeg prints them. */
const DISK_FAULT_WORDS = /No space left on device|Read-only file system|quota exceeded/i;

export interface MediaToolOptions {
  concurrency: number;
  timeoutMs: number;
  /**
   * Where the runs write their output. A failed run is checked against this disk: ffmpeg often
   * reports a full disk only through what follows from it (a truncated segment is "Invalid data").
   */
  scratchDirectory?: string;
  /** Told how each run ended and how long it took (metrics). */
  onRun?: (
    tool: "ffmpeg" | "ffprobe",
    outcome: "succeeded" | "failed" | "timed_out",
    seconds: number,
  ) => void;
}

/**
 * Runs ffmpeg and ffprobe as child processes, never more than `concurrency` at once and each for at
 * most `timeoutMs`, so processing can never starve or block the API.
 */
export class MediaTools {
  readonly #children = new Set<ChildProcess>();
  #stopped = false;
  readonly #limit: LimitFunction;

  constructor(
    readonly paths: MediaToolPaths,
    private readonly options: MediaToolOptions,
  ) {
    this.#limit = pLimit(options.concurrency);
  }

  /** Runs ffmpeg; `signal` ends the run (or its wait for a slot) with `ToolsCancelledError`. */
  ffmpeg(args: string[], signal?: AbortSignal): Promise<void> {
    return this.#limit(() =>
      this.#spawn(
        "ffmpeg",
        this.paths.ffmpeg,
        ["-hide_banner", "-nostdin", "-loglevel", "error", "-y", ...args],
        signal,
      ).then(() => {}),
    );
  }

  /**
   * What ffprobe finds in `file`, as `reading` says:
   * - `inputOptions` go before the file (`SOURCE_READING` for an uploaded source);
   * - only the audio streams `audioTaken` admits are taken: the sound, and the hold, are of those;
   * - `countPackets` reads the whole file, without decoding it, and leaves out the audio streams
   *   that carry no packets at all (a header can declare a stream that was never written). The
   *   streams listed are still those the header names: one found further in is never counted in.
   */
  probe(file: string, reading: ProbeReading = {}): Promise<ProbeResult> {
    const { inputOptions = [], audioTaken = () => true, countPackets = false } = reading;
    return this.#limit(async () => {
      const output = await this.#spawn("ffprobe", this.paths.ffprobe, [
        "-v",
        "error",
        "-print_format",
        "json",
        "-show_format",
        "-show_streams",
        ...(countPackets ? ["-count_packets"] : []),
        ...inputOptions,
        file,
      ]);
      let parsed: ProbeJson;
      try {
        parsed = JSON.parse(output) as ProbeJson;
      } catch {
        throw new MediaToolError("ffprobe returned unreadable output");
      }
      // A still attached as cover art (an MP3's) is no video.
      const video = parsed.streams?.find(
        (stream) => stream.codec_type === "video" && stream.disposition?.attached_pic !== 1,
      );
      if (!video?.width || !video.height) throw new MediaToolError("the file has no video stream");
      if (video.width * video.height > MAX_SOURCE_PIXELS) {
        throw new MediaToolError(
          `the picture is ${video.width}x${video.height}, more than the ${MAX_SOURCE_PIXELS} pixels (8192x4352) taken`,
        );
      }
      const base = rateOf(video.r_frame_rate);
      const audioWithoutPackets = countPackets ? audioWithoutPacketsOf(parsed.streams ?? []) : [];
      const tooLate = streamsBeginningTooLate(parsed.streams ?? [], video);
      const neverTaken = (stream: number | undefined) =>
        stream === undefined || audioWithoutPackets.includes(stream) || tooLate.has(stream);
      const audioTracks = audioTracksOf(
        parsed.streams ?? [],
        (stream) => audioTaken(stream) && !neverTaken(stream),
      );
      const audioStream = audioTracks[0]?.stream;
      const audio = parsed.streams?.find((stream) => stream.index === audioStream);
      let timeline = timelineOfHeader(parsed, video, audio);
      // A browser recording's header has neither its length nor an average rate: its packets tell.
      const clockTicks = !base || base.num / base.den > MAX_FRAME_RATE;
      if (lengthOf(timeline) === undefined || (timeline.averageRate === undefined && clockTicks)) {
        const packets = new PacketTimeline(video.index ?? 0, audioStream);
        await this.#spawn(
          "ffprobe",
          this.paths.ffprobe,
          [
            "-v",
            "error",
            "-show_entries",
            "packet=stream_index,pts_time,duration_time",
            "-of",
            "csv=p=0",
            ...inputOptions,
            file,
          ],
          undefined,
          (text) => packets.push(text),
        );
        const measured = packets.finish();
        timeline = {
          ...measured,
          containerS: timeline.containerS,
          averageRate: timeline.averageRate ?? measured.averageRate,
        };
      }
      const durationS = lengthOf(timeline);
      if (durationS === undefined || durationS <= 0) throw new MediaToolError("the video has no duration");
      return {
        durationS,
        ...displaySize(video, video.width, video.height),
        ...renditionRateOf(base, timeline.averageRate),
        audioTracks,
        holdLastFrameS: soundPastPictureS(timeline, durationS),
        videoCodec: video.codec_name ?? "unknown",
        profile: video.profile,
        level: video.level,
        hdr: isHdrTransfer(video.color_transfer)
          ? { transfer: video.color_transfer, fullRange: video.color_range === "pc" }
          : undefined,
        interlaced: INTERLACED_FIELD_ORDERS.has(video.field_order ?? ""),
        inputOptions,
        lateSound: lateSoundOf(parsed, audioTracks),
        audioWithoutPackets,
        soundNotAnalyzed:
          countPackets &&
          ((parsed.streams ?? []).some(
            (stream) =>
              stream.codec_type === "audio" &&
              !neverTaken(stream.index) &&
              !(Number(stream.sample_rate) > 0 && (stream.channels ?? 0) > 0),
          ) ||
            (audioTracks.length > 0 && STARTS_UNSTATED.has(parsed.format?.format_name ?? ""))),
      };
    });
  }

  /**
   * The first video frame's timestamp in an MPEG-TS file, in its 90 kHz ticks (`start_pts`); undefined
   * when ffprobe finds no video stream or no start.
   */
  firstVideoPts(file: string): Promise<number | undefined> {
    return this.#limit(async () => {
      const output = await this.#spawn("ffprobe", this.paths.ffprobe, [
        "-v",
        "error",
        "-select_streams",
        "v:0",
        "-show_entries",
        "stream=start_pts",
        "-of",
        "csv=p=0",
        file,
      ]);
      const pts = Number.parseInt(output.trim(), 10);
      return Number.isSafeInteger(pts) ? pts : undefined;
    });
  }

  /**
   * Ends every ffmpeg and ffprobe this process runs, and refuses new ones: the process is stopping,
   * and its work is left to be done again (a tool still running would outlive it, or hold its
   * shutdown for as long as `CUMULO_FFMPEG_TIMEOUT_S`). Their runs fail with `ToolsStoppedError`.
   */
  stop(): void {
    this.#stopped = true;
    for (const child of this.#children) child.kill("SIGKILL");
  }

  /** Runs a tool; its output is the answer, or handed to `consume` as it comes when given (then never kept). */
  #spawn(
    label: "ffmpeg" | "ffprobe",
    command: string,
    args: string[],
    signal?: AbortSignal,
    consume?: (text: string) => void,
  ): Promise<string> {
    if (this.#stopped) return Promise.reject(new ToolsStoppedError());
    if (signal?.aborted) return Promise.reject(new ToolsCancelledError());
    const started = performance.now();
    let counted = false;
    // A process that cannot start may report both "error" and "close": it is one run.
    const ran = (outcome: "succeeded" | "failed" | "timed_out") => {
      if (!counted) this.options.onRun?.(label, outcome, (performance.now() - started) / 1000);
      counted = true;
    };
    return new Promise((resolve, reject) => {
      const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
      this.#children.add(child);
      let stdout = "";
      let stderr = "";
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill("SIGKILL");
      }, this.options.timeoutMs);
      const cancel = () => child.kill("SIGKILL");
      signal?.addEventListener("abort", cancel, { once: true });
      // First, and before the pipes are read: a process that could not start (no descriptors left,
      // EMFILE) has no pipes, and its "error" event without a listener ended the whole node.
      child.on("error", (error: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", cancel);
        this.#children.delete(child);
        ran("failed");
        const message = `could not run ${command}: ${error.message}`;
        // Out of descriptors is the machine's state, which a job waits out; not the input's fault.
        reject(
          OUT_OF_RESOURCES.has(error.code ?? "")
            ? new ToolStartError(error.code, message)
            : new MediaToolError(message),
        );
      });
      child.stdout?.setEncoding("utf8");
      child.stdout?.on("data", (chunk: string) => {
        if (consume) consume(chunk);
        else stdout += chunk;
      });
      child.stderr?.on("data", (chunk: Buffer) => {
        stderr = (stderr + chunk.toString()).slice(-STDERR_KEPT);
      });
      child.on("close", (code, killedBy) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", cancel);
        this.#children.delete(child);
        if (this.#stopped) return reject(new ToolsStoppedError());
        if (signal?.aborted) return reject(new ToolsCancelledError());
        // ffmpeg exits 0 when only writing an output's trailer failed: that output is incomplete.
        const diskFault = DISK_FAULT_WORDS.test(stderr);
        ran(timedOut ? "timed_out" : code === 0 && !diskFault ? "succeeded" : "failed");
        const tool = basename(command);
        if (timedOut)
          return reject(new ToolTimedOutError(`${tool} timed out after ${this.options.timeoutMs} ms`));
        if (code === 0 && !diskFault) return resolve(stdout);
        const refusedFormat = NOT_ON_WHITELIST.exec(stderr)?.[1];
        const reason = refusedFormat
          ? `the file is read as ${refusedFormat}, not a format video sources are read from`
          : failureReason(stderr) || (killedBy ? `killed by ${killedBy}` : `exit code ${code}`);
        const failure = new MediaToolError(`${tool}: ${reason}`);
        const { scratchDirectory } = this.options;
        if (diskFault) return reject(new ScratchDiskError(failure));
        if (scratchDirectory === undefined) return reject(failure);
        void diskCannotWrite(scratchDirectory).then((full) =>
          reject(full ? new ScratchDiskError(failure) : failure),
        );
      });
    });
  }
}
