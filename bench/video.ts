/**
 * Video pipeline against the best single ffmpeg command, per run and on the same machine:
 * - `single`: one hand-written ffmpeg command producing the same outputs (the 720p-and-below ladder
 *   from one decode with a `split` graph, the MP4 written from the top rung's encoded stream through
 *   the tee muxer, thumbnails, animated preview): the ceiling.
 * - `transcoder`: Cumulo's Transcoder (probe, transcode, package) run directly in this script.
 * - `cumulo`: the clip uploaded to a Cumulo started here (SQLite, `CUMULO_FFMPEG_CONCURRENCY=1`) until
 *   `ready` (HTTP upload, blob store, job queue, stage transactions and webhooks, outputs copied into the
 *   blob store).
 * "first segment" is when the lowest rung's media playlist first lists a segment, i.e. that rung is
 * playable. Ratios last. `npm run bench:video`; BENCH_VIDEO_SECONDS (10), BENCH_VIDEO_SIZE (1280x720),
 * BENCH_RUNS (1).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { locateMediaTools, MediaTools } from "../src/video/media-tools.ts";
import { thumbnailCountFor } from "../src/video/pipeline.ts";
import { ladderFor, scaledWidth, Transcoder, thumbnailSelection } from "../src/video/transcoder.ts";
import { generateClip } from "../test/support/media.ts";
import { BENCH_KEY, formatRow, startBenchCumulo } from "./support.ts";

const SECONDS = Number(process.env.BENCH_VIDEO_SECONDS ?? 10);
const [WIDTH, HEIGHT] = (process.env.BENCH_VIDEO_SIZE ?? "1280x720").split("x").map(Number) as [
  number,
  number,
];
const RUNS = Number(process.env.BENCH_RUNS ?? 1);
const tools = new MediaTools(locateMediaTools(), { concurrency: 1, timeoutMs: 3_600_000 });

/**
 * CPU seconds (user + system) used by this process's finished child processes, i.e. ffmpeg: steadier
 * than wall time on a loaded machine. NaN where /proc is missing.
 */
function childCpuS(): number {
  try {
    const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]?.split(" ") ?? [];
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return Number.NaN;
  }
}

/** Seconds from `started` until `playlist` lists a segment; stops polling when `done` settles. */
async function firstSegment(playlist: string, started: number, done: Promise<unknown>): Promise<number> {
  let finished = false;
  void done.finally(() => {
    finished = true;
  });
  for (;;) {
    const text = await readFile(playlist, "utf8").catch(() => "");
    if (/\.ts$/m.test(text)) return (performance.now() - started) / 1000;
    if (finished) return Number.NaN;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The hand-written single command for the same outputs as the pipeline. */
function singleCommand(clip: string, out: string): { args: string[]; lowest: string } {
  const source = { width: WIDTH, height: HEIGHT };
  const rungs = ladderFor(HEIGHT);
  const thumbnails = thumbnailCountFor(SECONDS);
  const thumbHeight = Math.min(360, HEIGHT);
  const graph = [
    `[0:v]split=${rungs.length + 2}${rungs.map((_, i) => `[in${i}]`).join("")}[inthumbs][inpreview]`,
    ...rungs.map((rung, i) => `[in${i}]scale=${scaledWidth(source, rung.size)}:${rung.size}[rung${i}]`),
    `[inthumbs]select='${thumbnailSelection(SECONDS, thumbnails)}',setpts=N/TB,scale=-2:${thumbHeight}[thumbs]`,
    `[inpreview]trim=duration=3,fps=10,scale=320:-2[preview]`,
  ].join(";");
  const args = ["-i", clip, "-filter_complex", graph];
  rungs.forEach((rung, i) => {
    const dir = join(out, `${rung.size}p`);
    mkdirSync(dir, { recursive: true });
    const hls = `hls_time=4:hls_playlist_type=event:hls_segment_filename=${dir}/segment_%03d.ts`;
    args.push(
      ...[
        "-map",
        `[rung${i}]`,
        "-map",
        "0:a:0",
        "-c:v",
        "libx264",
        "-profile:v",
        "high",
        "-preset",
        "veryfast",
      ],
      ...[
        "-pix_fmt",
        "yuv420p",
        "-b:v",
        `${rung.videoKbps}k`,
        "-maxrate",
        `${Math.round(rung.videoKbps * 1.2)}k`,
      ],
      ...["-bufsize", `${rung.videoKbps * 2}k`, "-force_key_frames", "expr:gte(t,n_forced*4)"],
      ...["-c:a", "aac", "-b:a", "128k", "-ac", "2"],
      ...(i === rungs.findIndex((r) => r.size <= 720)
        ? ["-f", "tee", `[f=hls:${hls}]${dir}/index.m3u8|[f=mp4:movflags=+faststart]${out}/play.mp4`]
        : [
            "-f",
            "hls",
            ...hls
              .split(":")
              .flatMap((option) => [`-${option.split("=")[0]}`, option.slice(option.indexOf("=") + 1)]),
            `${dir}/index.m3u8`,
          ]),
    );
  });
  mkdirSync(join(out, "thumbnails"), { recursive: true });
  args.push("-map", "[thumbs]", "-r", "1", "-q:v", "4", join(out, "thumbnails", "thumbnail_%03d.jpg"));
  args.push(
    "-map",
    "[preview]",
    "-c:v",
    "libwebp",
    "-quality",
    "60",
    "-loop",
    "0",
    join(out, "preview.webp"),
  );
  return { args, lowest: join(out, `${rungs[rungs.length - 1]?.size}p`, "index.m3u8") };
}

interface Timing {
  totalS: number;
  cpuS: number;
  firstSegmentS: number;
}

async function single(clip: string, out: string): Promise<Timing> {
  const { args, lowest } = singleCommand(clip, out);
  const cpu = childCpuS();
  const started = performance.now();
  const run = tools.ffmpeg(args);
  const first = firstSegment(lowest, started, run);
  await run;
  const totalS = (performance.now() - started) / 1000;
  return { totalS, cpuS: childCpuS() - cpu, firstSegmentS: await first };
}

async function direct(clip: string, out: string): Promise<Timing> {
  const transcoder = new Transcoder(tools);
  const cpu = childCpuS();
  const started = performance.now();
  const probe = await transcoder.probe(clip);
  const lowest = ladderFor(Math.min(probe.width, probe.height)).pop()?.size;
  const run = transcoder.transcode(clip, out, probe, thumbnailCountFor(probe.durationS));
  const first = firstSegment(join(out, `${lowest}p`, "index.m3u8"), started, run);
  const made = await run;
  await transcoder.package(out, made.renditions, made.audio);
  const totalS = (performance.now() - started) / 1000;
  return { totalS, cpuS: childCpuS() - cpu, firstSegmentS: await first };
}

/** Upload to `ready`; the CPU figure is ffmpeg's only (the server runs in this process). */
async function throughCumulo(clip: string): Promise<Omit<Timing, "firstSegmentS">> {
  const bench = await startBenchCumulo("sqlite", { CUMULO_FFMPEG_CONCURRENCY: "1" });
  try {
    // A node just started compiles its route schemas in idle turns: about 0.3 s of CPU that took
    // from ffmpeg's two cores during the first encode, which a running node never pays (as in
    // bench/webhooks.ts).
    await bench.cumulo.app?.compileSchemas();
    const base = bench.cumulo.apiUrl ?? "";
    const headers = { authorization: `Bearer ${BENCH_KEY}`, "content-type": "application/json" };
    const call = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${base}${path}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return (await response.json()) as { data: { id: string; status: string } };
    };
    const library = (await call("POST", "/v1/media/libraries", { name: "bench" })).data.id;
    const video = (await call("POST", `/v1/media/libraries/${library}/videos`, { title: "bench" })).data.id;
    const path = `/v1/media/libraries/${library}/videos/${video}`;
    const body = readFileSync(clip);
    const cpu = childCpuS();
    const started = performance.now();
    const upload = await fetch(`${base}${path}/source`, {
      method: "PUT",
      headers: { authorization: `Bearer ${BENCH_KEY}`, "content-type": "video/mp4" },
      body,
    });
    if (upload.status !== 202) throw new Error(`upload: ${upload.status} ${await upload.text()}`);
    for (;;) {
      const { status } = (await call("GET", path)).data;
      if (status === "ready") break;
      if (status === "failed") throw new Error("processing failed");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return { totalS: (performance.now() - started) / 1000, cpuS: childCpuS() - cpu };
  } finally {
    await bench.close();
  }
}

const work = mkdtempSync(join(tmpdir(), "cumulo-bench-video-"));
try {
  const clip = await generateClip(work, { seconds: SECONDS, width: WIDTH, height: HEIGHT });
  console.log(
    `source: ${SECONDS} s, ${WIDTH}x${HEIGHT}, H.264 + AAC; ladder ${ladderFor(HEIGHT)
      .map((rung) => `${rung.size}p`)
      .join(" ")} + MP4 + ${thumbnailCountFor(SECONDS)} thumbnails + preview`,
  );
  const columns = ["run", "single s", "cpu", "1st seg", "transcoder s", "cpu", "1st seg", "cumulo s", "cpu"];
  const ratios = ["cumulo/single", "cpu ratio", "transcoder/single"];
  const widths = [
    ...columns.map((column) => Math.max(8, column.length + 2)),
    ...ratios.map((r) => r.length + 2),
  ];
  console.log(formatRow([...columns, ...ratios], widths));
  for (let run = 1; run <= RUNS; run++) {
    const baseline = await single(clip, join(work, `single-${run}`));
    const ours = await direct(clip, join(work, `direct-${run}`));
    const cumulo = await throughCumulo(clip);
    console.log(
      formatRow(
        [
          run,
          ...[baseline.totalS, baseline.cpuS, baseline.firstSegmentS].map((value) => value.toFixed(2)),
          ...[ours.totalS, ours.cpuS, ours.firstSegmentS].map((value) => value.toFixed(2)),
          ...[cumulo.totalS, cumulo.cpuS].map((value) => value.toFixed(2)),
          `${(cumulo.totalS / baseline.totalS).toFixed(2)}x`,
          `${(cumulo.cpuS / baseline.cpuS).toFixed(2)}x`,
          `${(ours.totalS / baseline.totalS).toFixed(2)}x`,
        ],
        widths,
      ),
    );
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
