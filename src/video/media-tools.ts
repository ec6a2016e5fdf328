import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { createRequire } from "node:module";
import { basename, delimiter, join } from "node:path";
import pLimit, { type LimitFunction } from "p-limit";

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
  /** Frames a second (the stream's own rate; 30 when ffprobe cannot tell). */
  frameRate: number;
  hasAudio: boolean;
  videoCodec: string;
  /** H.264 profile and level as ffprobe names them, for the HLS CODECS attribute. */
  profile: string | undefined;
  level: number | undefined;
  /** High dynamic range: the transfer curve (PQ or HLG) that renditions must be tone-mapped from. */
  hdr: { transfer: HdrTransfer; fullRange: boolean } | undefined;
}

/** The HDR transfer curves, as ffprobe names them: PQ (HDR10, Dolby Vision) and HLG. */
const HDR_TRANSFERS = ["smpte2084", "arib-std-b67"] as const;
export type HdrTransfer = (typeof HDR_TRANSFERS)[number];
const isHdrTransfer = (transfer: string | undefined): transfer is HdrTransfer =>
  (HDR_TRANSFERS as readonly (string | undefined)[]).includes(transfer);

interface ProbeStream {
  codec_type?: string;
  codec_name?: string;
  width?: number;
  height?: number;
  duration?: string;
  profile?: string;
  level?: number;
  avg_frame_rate?: string;
  r_frame_rate?: string;
  /** `num:den`, the shape of one pixel (anamorphic video stretches its pixels). */
  sample_aspect_ratio?: string;
  color_transfer?: string;
  /** `tv` (limited) or `pc` (full). */
  color_range?: string;
  disposition?: { attached_pic?: number };
  tags?: { rotate?: string };
  side_data_list?: { rotation?: number }[];
}

interface ProbeJson {
  format?: { duration?: string };
  streams?: ProbeStream[];
}

const DEFAULT_FRAME_RATE = 30;

/** The first of `rates` (`num/den` frames a second, as ffprobe writes them) that is one. */
function frameRateOf(...rates: (string | undefined)[]): number {
  for (const rate of rates) {
    const [num, den] = (rate ?? "").split("/").map(Number);
    if (num && den && num / den > 0) return num / den;
  }
  return DEFAULT_FRAME_RATE;
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

export interface MediaToolOptions {
  concurrency: number;
  timeoutMs: number;
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

  ffmpeg(args: string[]): Promise<void> {
    return this.#limit(() =>
      this.#spawn("ffmpeg", this.paths.ffmpeg, [
        "-hide_banner",
        "-nostdin",
        "-loglevel",
        "error",
        "-y",
        ...args,
      ]).then(() => {}),
    );
  }

  probe(file: string): Promise<ProbeResult> {
    return this.#limit(async () => {
      const output = await this.#spawn("ffprobe", this.paths.ffprobe, [
        "-v",
        "error",
        "-print_format",
        "json",
        "-show_format",
        "-show_streams",
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
      const durationS = Number(parsed.format?.duration ?? video.duration ?? 0);
      if (!Number.isFinite(durationS) || durationS <= 0)
        throw new MediaToolError("the video has no duration");
      return {
        durationS,
        ...displaySize(video, video.width, video.height),
        // The average, as the output keeps the source's timing: a variable rate's base (r_frame_rate)
        // can be a clock's 1000/1.
        frameRate: frameRateOf(video.avg_frame_rate, video.r_frame_rate),
        hasAudio: parsed.streams?.some((stream) => stream.codec_type === "audio") ?? false,
        videoCodec: video.codec_name ?? "unknown",
        profile: video.profile,
        level: video.level,
        hdr: isHdrTransfer(video.color_transfer)
          ? { transfer: video.color_transfer, fullRange: video.color_range === "pc" }
          : undefined,
      };
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

  #spawn(label: "ffmpeg" | "ffprobe", command: string, args: string[]): Promise<string> {
    if (this.#stopped) return Promise.reject(new ToolsStoppedError());
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
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
      });
      child.stderr.on("data", (chunk: Buffer) => {
        stderr = (stderr + chunk.toString()).slice(-STDERR_KEPT);
      });
      child.on("error", (error) => {
        clearTimeout(timer);
        ran("failed");
        reject(new MediaToolError(`could not run ${command}: ${error.message}`));
      });
      child.on("close", (code, signal) => {
        clearTimeout(timer);
        this.#children.delete(child);
        if (this.#stopped) return reject(new ToolsStoppedError());
        ran(timedOut ? "timed_out" : code === 0 ? "succeeded" : "failed");
        const tool = basename(command);
        if (timedOut)
          return reject(new MediaToolError(`${tool} timed out after ${this.options.timeoutMs} ms`));
        if (code !== 0) {
          const reason =
            stderr.trim().split("\n").pop() || (signal ? `killed by ${signal}` : `exit code ${code}`);
          return reject(new MediaToolError(`${tool}: ${reason}`));
        }
        resolve(stdout);
      });
    });
  }
}
