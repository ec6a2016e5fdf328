import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { locateMediaTools, MediaTools } from "../../src/video/media-tools.ts";

/** A 1x1 PNG, for a thumbnail upload. */
export const ONE_PIXEL_PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);

export const testMediaTools = () => new MediaTools(locateMediaTools(), { concurrency: 2, timeoutMs: 60_000 });

/**
 * A short test-pattern clip with a tone, made by ffmpeg at test time. With `grain`, the picture is
 * covered in random noise kept losslessly, so even a short clip is several MB (about 3 MB a second at
 * 320x180), for uploads that must take more than one chunk.
 */
export async function generateClip(
  directory: string,
  options: {
    seconds?: number;
    width?: number;
    height?: number;
    rate?: number;
    audio?: boolean;
    grain?: boolean;
  } = {},
): Promise<string> {
  const { seconds = 2.5, width = 640, height = 360, rate = 25, audio = true, grain = false } = options;
  const file = join(
    directory,
    `clip-${width}x${height}-${rate}fps${audio ? "" : "-silent"}${grain ? "-grain" : ""}.mp4`,
  );
  await testMediaTools().ffmpeg([
    "-f",
    "lavfi",
    "-i",
    `testsrc=size=${width}x${height}:rate=${rate}:duration=${seconds}`,
    ...(audio ? ["-f", "lavfi", "-i", `sine=frequency=440:duration=${seconds}`] : []),
    ...(grain ? ["-vf", "noise=alls=100:allf=t", "-qp", "0"] : []),
    "-c:v",
    "libx264",
    "-preset",
    "ultrafast",
    "-pix_fmt",
    "yuv420p",
    ...(audio ? ["-c:a", "aac", "-shortest"] : []),
    file,
  ]);
  return file;
}

/** ffmpeg's input arguments for lavfi sources (`testsrc=...`, `sine=...`), in order: inputs 0, 1, ... */
export const lavfi = (...graphs: string[]): string[] =>
  graphs.flatMap((graph) => ["-f", "lavfi", "-i", graph]);

/** The command lines of the ffmpeg processes working in `directory` (they name its files). */
export function ffmpegsIn(directory: string): string[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "utf8");
      } catch {
        return "";
      }
    })
    .filter((command) => command.includes("ffmpeg") && command.includes(directory));
}

/**
 * ffprobe's view of a file's streams: the fields `entries` names (`codec_type,duration`), read from
 * its JSON; `options` go first (`-select_streams v:0`, `-count_frames`).
 */
export function probeStreams(
  file: string,
  entries: string,
  options: string[] = [],
): Record<string, string>[] {
  const output = execFileSync(
    locateMediaTools().ffprobe,
    ["-v", "error", ...options, "-show_entries", `stream=${entries}`, "-of", "json", file],
    { encoding: "utf8" },
  );
  return (JSON.parse(output) as { streams: Record<string, string>[] }).streams;
}
