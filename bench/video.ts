/**
 * Video pipeline overhead: wall time from upload to `ready` through Cumulo (HTTP upload, blob store,
 * job queue, stage transactions and webhooks, copying renditions into the blob store) against running
 * the same ffmpeg commands (Transcoder.probe/transcode/package) directly in this script, per second of
 * source video. `npm run bench:video`; BENCH_VIDEO_SECONDS (10), BENCH_VIDEO_SIZE (1280x720),
 * BENCH_RUNS (1).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { locateMediaTools, MediaTools } from "../src/video/media-tools.ts";
import { thumbnailCountFor } from "../src/video/pipeline.ts";
import { Transcoder } from "../src/video/transcoder.ts";
import { generateClip } from "../test/support/media.ts";
import { BENCH_KEY, formatRow, startBenchCumulo } from "./support.ts";

const SECONDS = Number(process.env.BENCH_VIDEO_SECONDS ?? 10);
const [WIDTH, HEIGHT] = (process.env.BENCH_VIDEO_SIZE ?? "1280x720").split("x").map(Number) as [
  number,
  number,
];
const RUNS = Number(process.env.BENCH_RUNS ?? 1);

async function direct(clip: string, work: string, run: number): Promise<number> {
  const transcoder = new Transcoder(
    new MediaTools(locateMediaTools(), { concurrency: 1, timeoutMs: 3_600_000 }),
  );
  const out = join(work, `direct-${run}`);
  const started = performance.now();
  const probe = await transcoder.probe(clip);
  const renditions = await transcoder.transcode(clip, out, probe);
  await transcoder.package(clip, out, probe, renditions, thumbnailCountFor(probe.durationS));
  return (performance.now() - started) / 1000;
}

async function throughCumulo(clip: string): Promise<number> {
  const bench = await startBenchCumulo("sqlite", { CUMULO_FFMPEG_CONCURRENCY: "1" });
  try {
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
    return (performance.now() - started) / 1000;
  } finally {
    await bench.close();
  }
}

const work = mkdtempSync(join(tmpdir(), "cumulo-bench-video-"));
try {
  const clip = await generateClip(work, { seconds: SECONDS, width: WIDTH, height: HEIGHT });
  console.log(`source: ${SECONDS} s, ${WIDTH}x${HEIGHT}, H.264 + AAC; ffmpeg one command at a time in both`);
  const widths = [6, 14, 14, 16, 16, 10];
  console.log(
    formatRow(["run", "direct s", "cumulo s", "direct s/src s", "cumulo s/src s", "overhead"], widths),
  );
  for (let run = 1; run <= RUNS; run++) {
    const directS = await direct(clip, work, run);
    const pipelineS = await throughCumulo(clip);
    console.log(
      formatRow(
        [
          run,
          directS.toFixed(2),
          pipelineS.toFixed(2),
          (directS / SECONDS).toFixed(3),
          (pipelineS / SECONDS).toFixed(3),
          `${(pipelineS / directS).toFixed(3)}x`,
        ],
        widths,
      ),
    );
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
