import { mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { MediaTools, ProbeResult } from "./media-tools.ts";

/** Rungs of the HLS ladder; a source gets every rung up to its own height. */
export const LADDER = [
  { height: 1080, videoKbps: 5000 },
  { height: 720, videoKbps: 2800 },
  { height: 480, videoKbps: 1400 },
  { height: 360, videoKbps: 800 },
  { height: 240, videoKbps: 400 },
] as const;

const AUDIO_KBPS = 128;
const SEGMENT_S = 4;
const MP4_MAX_HEIGHT = 720;
const THUMBNAIL_HEIGHT = 360;
const PREVIEW_SECONDS = 3;

export const MASTER_PLAYLIST = "playlist.m3u8";
export const MP4_FILE = "play.mp4";
export const PREVIEW_FILE = "preview.webp";
export const THUMBNAIL_DIR = "thumbnails";

export interface Rung {
  height: number;
  videoKbps: number;
}

/** H.264 level for a rung: enough for 30 fps at its size, set explicitly so CODECS is known. */
const levelFor = (height: number) => (height > 720 ? 40 : height > 480 ? 31 : 30);

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

export function ladderFor(sourceHeight: number): Rung[] {
  const rungs = LADDER.filter((rung) => rung.height <= sourceHeight).map((rung) => ({ ...rung }));
  return rungs.length > 0 ? rungs : [{ height: even(sourceHeight), videoKbps: 400 }];
}

/** `avc1.PPCCLL` of the High profile at a level, e.g. 3.1 -> avc1.64001f. */
export const highProfileCodec = (level: number): string => `avc1.6400${level.toString(16).padStart(2, "0")}`;

/** The width that keeps the source's shape at `height`, rounded to an even number as H.264 needs. */
export const scaledWidth = (source: { width: number; height: number }, height: number) =>
  even((source.width * height) / source.height);

/** Turns a probed source into streamable renditions and its pictures, in an output directory. */
export class Transcoder {
  constructor(private readonly tools: MediaTools) {}

  probe(source: string): Promise<ProbeResult> {
    return this.tools.probe(source);
  }

  /** HLS renditions of the ladder and a progressive MP4. */
  async transcode(source: string, outDir: string, probe: ProbeResult): Promise<Rendition[]> {
    const audio = probe.hasAudio ? ["-c:a", "aac", "-b:a", `${AUDIO_KBPS}k`, "-ac", "2"] : ["-an"];
    const renditions: Rendition[] = [];
    for (const rung of ladderFor(probe.height)) {
      const directory = `${rung.height}p`;
      const width = scaledWidth(probe, rung.height);
      await mkdir(join(outDir, directory), { recursive: true });
      await this.tools.ffmpeg([
        "-i",
        source,
        "-vf",
        `scale=${width}:${rung.height}`,
        "-c:v",
        "libx264",
        "-profile:v",
        "high",
        "-level:v",
        (levelFor(rung.height) / 10).toFixed(1),
        "-preset",
        "veryfast",
        "-pix_fmt",
        "yuv420p",
        "-b:v",
        `${rung.videoKbps}k`,
        "-maxrate",
        `${Math.round(rung.videoKbps * 1.2)}k`,
        "-bufsize",
        `${rung.videoKbps * 2}k`,
        "-force_key_frames",
        `expr:gte(t,n_forced*${SEGMENT_S})`,
        ...audio,
        "-f",
        "hls",
        "-hls_time",
        String(SEGMENT_S),
        "-hls_playlist_type",
        "vod",
        "-hls_segment_filename",
        join(outDir, directory, "segment_%03d.ts"),
        join(outDir, directory, "index.m3u8"),
      ]);
      renditions.push({
        height: rung.height,
        width,
        codecs: highProfileCodec(levelFor(rung.height)),
        playlist: `${directory}/index.m3u8`,
        ...(await this.#bandwidth(outDir, directory, probe.durationS)),
      });
    }
    const mp4Height = Math.min(MP4_MAX_HEIGHT, even(probe.height));
    await this.tools.ffmpeg([
      "-i",
      source,
      "-vf",
      `scale=${scaledWidth(probe, mp4Height)}:${mp4Height}`,
      "-c:v",
      "libx264",
      "-preset",
      "veryfast",
      "-crf",
      "23",
      "-pix_fmt",
      "yuv420p",
      ...audio,
      "-movflags",
      "+faststart",
      join(outDir, MP4_FILE),
    ]);
    return renditions;
  }

  /** The master playlist, `count` thumbnails spread over the video, and an animated preview. */
  async package(
    source: string,
    outDir: string,
    probe: ProbeResult,
    renditions: Rendition[],
    thumbnailCount: number,
  ): Promise<{ thumbnails: string[] }> {
    await writeFile(join(outDir, MASTER_PLAYLIST), masterPlaylist(renditions, probe.hasAudio));

    await mkdir(join(outDir, THUMBNAIL_DIR), { recursive: true });
    const thumbnails: string[] = [];
    for (let index = 0; index < thumbnailCount; index++) {
      const at = (probe.durationS * (index + 0.5)) / thumbnailCount;
      const name = `${THUMBNAIL_DIR}/thumbnail_${String(index + 1).padStart(3, "0")}.jpg`;
      await this.tools.ffmpeg([
        "-ss",
        at.toFixed(3),
        "-i",
        source,
        "-frames:v",
        "1",
        "-vf",
        `scale=${scaledWidth(probe, Math.min(THUMBNAIL_HEIGHT, even(probe.height)))}:${Math.min(THUMBNAIL_HEIGHT, even(probe.height))}`,
        "-q:v",
        "4",
        join(outDir, name),
      ]);
      thumbnails.push(name);
    }

    await this.tools.ffmpeg([
      "-t",
      String(Math.min(PREVIEW_SECONDS, probe.durationS)),
      "-i",
      source,
      "-vf",
      "fps=10,scale=320:-2",
      "-an",
      "-c:v",
      "libwebp",
      "-quality",
      "60",
      "-loop",
      "0",
      join(outDir, PREVIEW_FILE),
    ]);
    return { thumbnails };
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
    const totalSeconds = durations.reduce((sum, value) => sum + value, 0) || durationS;
    return { bandwidth: Math.round(peak), averageBandwidth: Math.round(totalBits / totalSeconds) };
  }
}

export function masterPlaylist(renditions: Rendition[], hasAudio: boolean): string {
  const lines = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-INDEPENDENT-SEGMENTS"];
  for (const rendition of [...renditions].sort((a, b) => b.bandwidth - a.bandwidth)) {
    const codecs = hasAudio ? `${rendition.codecs},mp4a.40.2` : rendition.codecs;
    lines.push(
      `#EXT-X-STREAM-INF:BANDWIDTH=${rendition.bandwidth},AVERAGE-BANDWIDTH=${rendition.averageBandwidth},RESOLUTION=${rendition.width}x${rendition.height},CODECS="${codecs}"`,
      rendition.playlist,
    );
  }
  return `${lines.join("\n")}\n`;
}
