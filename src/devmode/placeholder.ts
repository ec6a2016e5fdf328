import { randomUUID } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Config } from "../config.ts";
import { locateMediaTools, MediaTools, type ProbeResult } from "../video/media-tools.ts";
import { thumbnailCountFor } from "../video/pipeline.ts";
import { MP4_FILE, Transcoder } from "../video/transcoder.ts";

/** Bump when the placeholder's recipe changes, so a cached older one is not used. */
const VERSION = "v3";
const SECONDS = 2;

export interface Placeholder {
  /** The processing output to copy for every video: HLS ladder, master playlist, MP4, pictures. */
  directory: string;
  /** The probe of the synthetic source it was made from (duration, size, audio). */
  probe: ProbeResult;
  /** Where its HLS segments start (`Transcoder.transcode`). */
  timelineStartPts: number | undefined;
}

/**
 * The renditions developer mode gives a video processed "instantly": made once, at first use, by the
 * real transcoder from a 2-second synthetic source (ffmpeg's test pattern and a tone), then cached in
 * `<data dir>/devmode/placeholder-v2/` and copied for every video. So they are real, valid media (an
 * HLS ladder that plays, an MP4, thumbnails and a preview) that cost no ffmpeg run per video.
 */
export class PlaceholderRenditions {
  #ready: Promise<Placeholder> | undefined;

  constructor(
    private readonly dataDir: string,
    private readonly tools: () => MediaTools,
  ) {}

  /** The configured ffmpeg, found on first use (a process that makes no placeholder needs none). */
  static of(config: Config): PlaceholderRenditions {
    let tools: MediaTools | undefined;
    return new PlaceholderRenditions(config.dataDir, () => {
      tools ??= new MediaTools(locateMediaTools(), {
        concurrency: config.video.ffmpegConcurrency,
        timeoutMs: config.video.ffmpegTimeoutMs,
      });
      return tools;
    });
  }

  get root(): string {
    return join(this.dataDir, "devmode", `placeholder-${VERSION}`);
  }

  get(): Promise<Placeholder> {
    this.#ready ??= this.#cachedOrMade().catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }

  /** The placeholder's MP4: a small valid video, e.g. a seeded video's source. */
  async mp4(): Promise<Buffer> {
    return readFile(join((await this.get()).directory, MP4_FILE));
  }

  async #cachedOrMade(): Promise<Placeholder> {
    const cached = await this.#read(this.root).catch(() => undefined);
    if (cached) return cached;
    // Made aside and moved in whole, so a crash never leaves a half-made placeholder in use.
    const building = `${this.root}.${randomUUID()}`;
    try {
      await mkdir(join(building, "renditions"), { recursive: true });
      const source = join(building, "source.mp4");
      const tools = this.tools();
      await tools.ffmpeg([
        "-f",
        "lavfi",
        "-i",
        `testsrc2=size=426x240:rate=25:duration=${SECONDS}`,
        "-f",
        "lavfi",
        "-i",
        `sine=frequency=440:sample_rate=48000:duration=${SECONDS}`,
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        "-c:a",
        "aac",
        "-shortest",
        source,
      ]);
      const probe = await tools.probe(source);
      const transcoder = new Transcoder(tools);
      const out = join(building, "renditions");
      const { renditions, audio, timelineStartPts } = await transcoder.transcode(
        source,
        out,
        probe,
        thumbnailCountFor(probe.durationS),
      );
      await transcoder.package(out, renditions, audio);
      await writeFile(join(building, "placeholder.json"), JSON.stringify({ probe, timelineStartPts }));
      await rm(this.root, { recursive: true, force: true });
      await rename(building, this.root);
      await this.#removeEarlierVersions();
    } finally {
      await rm(building, { recursive: true, force: true });
    }
    return this.#read(this.root);
  }

  /** Placeholders of earlier recipes (`placeholder-v1`, left by a release before): never read again. */
  async #removeEarlierVersions(): Promise<void> {
    const dir = join(this.dataDir, "devmode");
    for (const name of await readdir(dir)) {
      if (/^placeholder-v\d+$/.test(name) && name !== basename(this.root)) {
        await rm(join(dir, name), { recursive: true, force: true });
      }
    }
  }

  async #read(root: string): Promise<Placeholder> {
    const made = JSON.parse(await readFile(join(root, "placeholder.json"), "utf8")) as Omit<
      Placeholder,
      "directory"
    >;
    return { directory: join(root, "renditions"), ...made };
  }
}
