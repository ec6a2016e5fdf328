import { Counter, type CounterConfiguration, Histogram, type HistogramConfiguration } from "prom-client";

/*
 * prom-client hashes the label values and allocates on every `inc()` and `observe()`, even on a
 * child made by `labels()` (about 1-3 µs on the shared bench machine, `bench/metrics.ts`). The
 * metrics recorded on every request and every store query instead add to plain numbers held per
 * label set, and hand them to prom-client only when scraped.
 */

/** A counter of pre-made tallies: `tally.pending++` on the hot path, added to the counter at scrape. */
export class TalliedCounter<T extends string> {
  readonly #counter: Counter<T>;
  readonly #tallies: { child: Counter.Internal; pending: number }[] = [];

  constructor(configuration: Omit<CounterConfiguration<T>, "collect">) {
    const tallies = this.#tallies;
    this.#counter = new Counter({
      ...configuration,
      collect() {
        for (const tally of tallies) {
          if (tally.pending === 0) continue;
          tally.child.inc(tally.pending);
          tally.pending = 0;
        }
      },
    });
  }

  /** The tally of one label set (values in the order of `labelNames`); keep it and add to `pending`. */
  tally(...values: string[]): { pending: number } {
    const tally = {
      child: values.length === 0 ? this.#counter : this.#counter.labels(...values),
      pending: 0,
    };
    // Exported at 0 from now on: a series born with its first events counted hides them from rate().
    tally.child.inc(0);
    this.#tallies.push(tally);
    return tally;
  }
}

/** One label set of a tallied histogram: observation counts per bucket, the last one for +Inf. */
export interface HistogramSeries {
  readonly labels: Record<string, string>;
  readonly counts: Float64Array;
  readonly bounds: readonly number[];
  sum: number;
}

/** Records one observation: a bucket index found by a scan of a dozen bounds, two additions. */
export function observe(series: HistogramSeries, value: number): void {
  const { bounds, counts } = series;
  let bucket = 0;
  while (bucket < bounds.length && value > (bounds[bucket] as number)) bucket++;
  counts[bucket] = (counts[bucket] as number) + 1;
  series.sum += value;
}

/**
 * A histogram whose series are made once (`series()`) and fed with `observe()`; it exports the same
 * `_bucket`/`_sum`/`_count` samples as prom-client's own, from the tallies, at scrape time.
 */
export class TalliedHistogram<T extends string> extends Histogram<T> {
  readonly #name: string;
  readonly #help: string;
  readonly #bounds: readonly number[];
  readonly #series: HistogramSeries[] = [];

  constructor(configuration: HistogramConfiguration<T> & { buckets: number[] }) {
    super(configuration);
    this.#name = configuration.name;
    this.#help = configuration.help;
    this.#bounds = [...configuration.buckets].sort((a, b) => a - b);
  }

  /** The series of one label set (by label name); keep it and pass it to `observe()`. */
  series(labels: Partial<Record<T, string>> = {}): HistogramSeries {
    const series: HistogramSeries = {
      labels: labels as Record<string, string>,
      counts: new Float64Array(this.#bounds.length + 1),
      bounds: this.#bounds,
      sum: 0,
    };
    this.#series.push(series);
    return series;
  }

  override async get(): Promise<Awaited<ReturnType<Histogram<T>["get"]>>> {
    return this.getForPromString();
  }

  /** What prom-client's registry reads to write the exposition (in place of `get()` when present). */
  async getForPromString(): Promise<Awaited<ReturnType<Histogram<T>["get"]>>> {
    const name = this.#name;
    const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
    for (const series of this.#series) {
      let cumulative = 0;
      this.#bounds.forEach((bound, index) => {
        cumulative += series.counts[index] as number;
        values.push({
          labels: { le: bound, ...series.labels },
          value: cumulative,
          metricName: `${name}_bucket`,
        });
      });
      cumulative += series.counts[this.#bounds.length] as number;
      values.push({
        labels: { le: "+Inf", ...series.labels },
        value: cumulative,
        metricName: `${name}_bucket`,
      });
      values.push({ labels: series.labels, value: series.sum, metricName: `${name}_sum` });
      values.push({ labels: series.labels, value: cumulative, metricName: `${name}_count` });
    }
    const metric = { name, help: this.#help, type: "histogram", aggregator: "sum", values };
    // prom-client's types name no `le` among a histogram's labels, though its own samples carry it.
    return metric as unknown as Awaited<ReturnType<Histogram<T>["get"]>>;
  }
}
