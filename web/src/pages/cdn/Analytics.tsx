import "uplot/dist/uPlot.min.css";
import { useEffect, useId, useMemo, useRef, useState } from "react";
import { useSearchParams } from "react-router";
import uPlot from "uplot";
import { api, call } from "../../api.ts";
import { DateTime } from "../../components/DateTime.tsx";
import { Field, OtherErrors } from "../../components/Field.tsx";
import { Empty, ErrorState, Loading } from "../../components/States.tsx";
import { useLoad } from "../../load.ts";
import { useTheme } from "../../theme.ts";

/** The eight metrics of getCdnAnalytics, in the API's order, with how a reader wants to see them. */
const METRICS = [
  { name: "requests", label: "Requests", format: (value: number) => value.toLocaleString(), total: "sum" },
  { name: "traffic", label: "Traffic sent", format: bytes, total: "sum" },
  {
    name: "cache_hit_traffic_ratio",
    label: "Cache hit ratio (traffic)",
    format: percent,
    total: "peak",
  },
  {
    name: "upstream_origin_time_ms",
    label: "Origin time (mean)",
    format: (value: number) => `${value.toFixed(1)} ms`,
    total: "peak",
  },
  {
    name: "responses_2xx",
    label: "2xx responses",
    format: (value: number) => value.toLocaleString(),
    total: "sum",
  },
  {
    name: "responses_3xx",
    label: "3xx responses",
    format: (value: number) => value.toLocaleString(),
    total: "sum",
  },
  {
    name: "responses_4xx",
    label: "4xx responses",
    format: (value: number) => value.toLocaleString(),
    total: "sum",
  },
  {
    name: "responses_5xx",
    label: "5xx responses",
    format: (value: number) => value.toLocaleString(),
    total: "sum",
  },
] as const;

/**
 * A ratio as a percentage: one decimal from 1 % up, two significant digits below it, so that a
 * small ratio (0.025 %) and its axis ticks are not all "0.0 %".
 */
function percent(value: number): string {
  const shown = value * 100;
  if (shown === 0 || Math.abs(shown) >= 1) return `${shown.toFixed(shown === 0 ? 0 : 1)} %`;
  return `${Number(shown.toPrecision(2))} %`;
}

/** Tick steps of whole numbers (1, 2, 5, 10, 20, ...): a count or a byte total has no half on its axis. */
const WHOLE_STEPS = Array.from({ length: 16 }, (_, power) =>
  [1, 2, 5].map((step) => step * 10 ** power),
).flat();

const RANGES = [
  { value: "1h", label: "Last hour", ms: 3_600_000, granularity: "1m" },
  { value: "6h", label: "Last 6 hours", ms: 6 * 3_600_000, granularity: "5m" },
  { value: "24h", label: "Last 24 hours", ms: 24 * 3_600_000, granularity: "1h" },
  { value: "7d", label: "Last 7 days", ms: 7 * 24 * 3_600_000, granularity: "6h" },
  { value: "30d", label: "Last 30 days", ms: 30 * 24 * 3_600_000, granularity: "1d" },
] as const;

const GRANULARITIES = ["1m", "5m", "15m", "1h", "6h", "1d"] as const;

function bytes(value: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let scaled = value;
  let unit = 0;
  while (scaled >= 1000 && unit < units.length - 1) {
    scaled /= 1000;
    unit += 1;
  }
  return `${scaled.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

type Row = { Timestamp: string } & Record<string, unknown>;

/** uPlot's own axis font, set on the axes so the labels are measured in the font they are drawn in. */
const AXIS_FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
let measuring: CanvasRenderingContext2D | null | undefined;

/**
 * The y axis as wide as its widest label plus uPlot's tick (10 px) and gap (5 px), so "100.0 KB" or
 * "100.0 %" is never cut at the left edge, whatever the values.
 */
function yAxisSize(_plot: uPlot, labels: string[] | null): number {
  measuring ??= document.createElement("canvas").getContext("2d");
  if (!measuring || !labels) return 60;
  const context = measuring;
  context.font = AXIS_FONT;
  const widest = Math.max(0, ...labels.map((label) => context.measureText(label).width));
  return Math.ceil(widest) + 10 + 5 + 6;
}

/** The stylesheet's colours of the theme shown, for the canvas (which cannot use var()). */
function chartColours() {
  const style = getComputedStyle(document.documentElement);
  const colour = (name: string) => style.getPropertyValue(name).trim();
  return {
    axis: colour("--muted"),
    grid: colour("--line"),
    line: colour("--accent"),
    fill: colour("--chart-fill"),
  };
}

/** A bucket's value of a metric (the API sends numbers; anything else counts as 0). */
const bucketValue = (row: Row, metric: string) => {
  const value = row[metric];
  return typeof value === "number" ? value : 0;
};

/**
 * Traffic of the organization or one distribution: all eight metrics as charts over a chosen range
 * and granularity. Each chart has its figures as text beside it (the total or mean, and a table on
 * request), since a canvas says nothing to a screen reader.
 */
/** The pickers as an address gives them; what it lacks or does not know takes the defaults. */
function pickersOf(params: URLSearchParams): { range: string; granularity: string; distribution: string } {
  const chosenRange = RANGES.find((option) => option.value === params.get("range")) ?? RANGES[2];
  const granularity = params.get("granularity") ?? "";
  return {
    range: chosenRange.value,
    granularity: (GRANULARITIES as readonly string[]).includes(granularity)
      ? granularity
      : chosenRange.granularity,
    distribution: params.get("distribution") ?? "",
  };
}

export function Analytics() {
  // The pickers live in the address (`?range=&granularity=&distribution=`), kept on reload and back.
  const [params, setParams] = useSearchParams();
  const { range, granularity, distribution } = pickersOf(params);
  const choose = (next: { range?: string; granularity?: string; distribution?: string }) => {
    // From the address as it is now, not as this render saw it: two changes made before the next
    // render (a range, then at once a granularity) must not undo each other.
    const values = { ...pickersOf(new URLSearchParams(window.location.search)), ...next };
    const updated = new URLSearchParams();
    updated.set("range", values.range);
    updated.set("granularity", values.granularity);
    if (values.distribution) updated.set("distribution", values.distribution);
    setParams(updated, { replace: true });
  };
  // `to` is fixed when the pickers change or on refresh, so reloading one answer asks for the same window.
  const [to, setTo] = useState(() => new Date());
  const windowMs = RANGES.find((option) => option.value === range)?.ms ?? RANGES[2].ms;
  const from = new Date(to.getTime() - windowMs);
  const distributions = useLoad(
    () => call(api.GET("/v1/cdn/distributions", { params: { query: { page: 1, limit: 100 } } })),
    "distributions",
  );
  const analytics = useLoad(
    () =>
      call(
        api.GET("/v1/cdn/analytics", {
          params: {
            query: {
              from: from.toISOString(),
              to: to.toISOString(),
              granularity,
              metrics: METRICS.map((metric) => metric.name),
              ...(distribution ? { distribution } : {}),
            },
          },
        }),
      ),
    `${from.toISOString()}|${to.toISOString()}|${granularity}|${distribution}`,
  );
  const fieldErrors = analytics.state === "error" ? errorsOf(analytics.error) : {};
  const hasFieldErrors = Object.keys(fieldErrors).length > 0;

  return (
    <section className="panel" aria-labelledby="cdn-analytics-title">
      <h2 id="cdn-analytics-title">Analytics</h2>
      <div className="filters">
        <Field label="Distribution" name="distribution" error={fieldErrors.distribution}>
          {(control) => (
            <select
              {...control}
              value={distribution}
              onChange={(event) => choose({ distribution: event.target.value })}
            >
              <option value="">All distributions</option>
              {distributions.data?.data.map((row) => (
                <option key={row.id} value={row.hostname}>
                  {row.hostname}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Range" name="range" error={fieldErrors.from ?? fieldErrors.to}>
          {(control) => (
            <select
              {...control}
              value={range}
              onChange={(event) => {
                const chosen = RANGES.find((option) => option.value === event.target.value) ?? RANGES[2];
                choose({ range: chosen.value, granularity: chosen.granularity });
                setTo(new Date());
              }}
            >
              {RANGES.map((option) => (
                <option key={option.value} value={option.value}>
                  {option.label}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Granularity" name="granularity" error={fieldErrors.granularity}>
          {(control) => (
            <select
              {...control}
              value={granularity}
              onChange={(event) => choose({ granularity: event.target.value })}
            >
              {GRANULARITIES.map((value) => (
                <option key={value} value={value}>
                  {value}
                </option>
              ))}
            </select>
          )}
        </Field>
        <button type="button" className="filters-button" onClick={() => setTo(new Date())}>
          Refresh
        </button>
      </div>
      {analytics.state === "loading" && <Loading what="Loading analytics" />}
      {analytics.state === "error" &&
        (hasFieldErrors ? (
          <OtherErrors errors={fieldErrors} shown={["distribution", "from", "to", "granularity"]} />
        ) : (
          <ErrorState error={analytics.error} onRetry={analytics.reload} />
        ))}
      {analytics.state === "ready" && <Figures rows={analytics.data.Data as Row[]} />}
    </section>
  );
}

/** What the API tells of the origin alone: its time (its bytes are only in the cache hit ratio, of sent bytes). */
const ORIGIN_METRICS = METRICS.filter((metric) => metric.name === "upstream_origin_time_ms");

/**
 * The charts of an answer. Without a viewer's request every viewer chart is a flat line at 0 (and
 * the ratio reads "highest 0.0 %"): that is said once instead. The edge may still have asked the
 * origin then, revalidating stale copies in the background (docs/cdn.md, Analytics): only the
 * origin's time is charted, under a note saying what happened.
 */
function Figures({ rows }: { rows: Row[] }) {
  const viewerRequests = rows.some((row) => bucketValue(row, "requests") > 0);
  if (viewerRequests) {
    return (
      <div className="chart-grid">
        {METRICS.map((metric) => (
          <MetricChart key={metric.name} metric={metric} rows={rows} />
        ))}
      </div>
    );
  }
  const originAsked = rows.some((row) => ORIGIN_METRICS.some((metric) => bucketValue(row, metric.name) > 0));
  if (!originAsked) {
    return (
      <Empty>
        <p>No traffic in this period.</p>
      </Empty>
    );
  }
  return (
    <>
      <p className="origin-only-note">
        No viewer requests in this period, so nothing was sent to viewers. The edge still asked the origin,
        revalidating stale copies in the background (<code>stale-while-revalidate</code>); how long the origin
        took is charted below.
      </p>
      <div className="chart-grid">
        {ORIGIN_METRICS.map((metric) => (
          <MetricChart key={metric.name} metric={metric} rows={rows} />
        ))}
      </div>
    </>
  );
}

function errorsOf(error: unknown): Record<string, string> {
  return typeof error === "object" && error !== null && "fieldErrors" in error
    ? (error as { fieldErrors: Record<string, string> }).fieldErrors
    : {};
}

function MetricChart({ metric, rows }: { metric: (typeof METRICS)[number]; rows: Row[] }) {
  const titleId = useId();
  const plotRef = useRef<HTMLDivElement>(null);
  const values = useMemo(() => rows.map((row) => bucketValue(row, metric.name)), [rows, metric]);
  const times = useMemo(() => rows.map((row) => Date.parse(row.Timestamp) / 1000), [rows]);
  const summed = values.reduce((sum, value) => sum + value, 0);
  // Ratios and means of buckets do not add up: those charts name their highest bucket instead.
  const summary = metric.total === "sum" ? summed : Math.max(0, ...values);
  const theme = useTheme();

  // biome-ignore lint/correctness/useExhaustiveDependencies: a theme chosen or the system's changed draws the chart again in its colours
  useEffect(() => {
    const element = plotRef.current;
    if (!element) return;
    const colours = chartColours();
    const grid = { stroke: colours.grid, width: 1 };
    const plot = new uPlot(
      {
        width: Math.max(element.clientWidth, 200),
        height: 160,
        legend: { show: false },
        cursor: { y: false },
        scales: { y: { range: (_plot, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] } },
        axes: [
          { stroke: colours.axis, font: AXIS_FONT, grid, ticks: grid },
          {
            stroke: colours.axis,
            font: AXIS_FONT,
            grid,
            ticks: grid,
            size: yAxisSize,
            // Counts and bytes step by whole numbers: an empty chart read "0, 0.5, 1" requests and "0 B,
            // 1 B, 1 B" sent (0.5 B rounded).
            ...(metric.total === "sum" ? { incrs: WHOLE_STEPS } : {}),
            values: (_plot, ticks) => ticks.map((tick) => metric.format(tick)),
          },
        ],
        series: [{}, { label: metric.label, stroke: colours.line, fill: colours.fill, width: 2 }],
      },
      [times, values],
      element,
    );
    const resize = new ResizeObserver(() =>
      plot.setSize({ width: Math.max(element.clientWidth, 200), height: 160 }),
    );
    resize.observe(element);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [metric, times, values, theme]);

  return (
    <figure className="chart" aria-labelledby={titleId} data-metric={metric.name}>
      <figcaption id={titleId}>
        <span className="chart-title">{metric.label}</span>{" "}
        <span className="chart-total" data-metric-total={metric.name} data-value={summary}>
          {/* "sum 44" and "peak 17.6 ms" read as labels of a spreadsheet; these read as a sentence. */}
          {metric.total === "sum"
            ? `${metric.format(summary)} in total`
            : `highest ${metric.format(summary)}`}
        </span>
      </figcaption>
      <div ref={plotRef} className="chart-plot" aria-hidden="true" />
      <details>
        <summary>
          <span className="visually-hidden">{metric.label}: </span>Figures per bucket
        </summary>
        <div className="table-wrap">
          <table>
            <caption className="visually-hidden">{metric.label} per bucket</caption>
            <thead>
              <tr>
                <th scope="col">Bucket from</th>
                <th scope="col">{metric.label}</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((row, index) => (
                <tr key={row.Timestamp}>
                  {/* In the reader's time, as on the chart's axis, not the API's ISO string. */}
                  <th scope="row">
                    <DateTime value={row.Timestamp} />
                  </th>
                  <td>{metric.format(values[index] ?? 0)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </figure>
  );
}
