import { type Static, type TNumber, type TOptional, Type } from "@sinclair/typebox";
import { expecting, HttpUrl, StringEnum, Timestamp, Uuid } from "../http/schemas.ts";

export const DISTRIBUTION_STATUSES = ["active", "disabled"] as const;

/** A host name: dot-separated labels of letters, digits and inner hyphens (checked case-insensitively). */
export const HOSTNAME_PATTERN =
  "^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$";

export const MAX_TTL_S = 31_536_000;

/** What an origin URL takes, in its validation errors (the schema's and the service's alike). */
export const ORIGIN_URL_WORDS = "an http or https URL such as https://origin.example.com";

const OriginUrl = HttpUrl({
  description: "http(s) URL of the origin",
  expected: ORIGIN_URL_WORDS,
  examples: ["https://origin.example.com"],
});

export const HOSTNAME_VERIFICATION_STATUSES = ["pending", "verified"] as const;

export const HostnameVerification = Type.Object(
  {
    status: StringEnum(HOSTNAME_VERIFICATION_STATUSES, {
      description: "pending: the edge serves the distribution path-style only, not under its host name",
    }),
    record_type: StringEnum(["TXT"] as const),
    record_name: Type.String({ examples: ["_cumulo-challenge.cdn.example.com"] }),
    record_value: Type.String({ examples: ["cumulo-verify-5f0c1e2d3b4a59687766554433221100"] }),
    expires_at: Type.Optional(
      Type.String({
        format: "date-time",
        examples: ["2026-11-24T08:30:00.123Z"],
        description:
          "Pending only: from then on another organization's create of the host name deletes this distribution and takes the name (CUMULO_CDN_HOSTNAME_CLAIM_TTL_HOURS after creation)",
      }),
    ),
  },
  {
    description:
      "Only when the platform verifies host names (CUMULO_CDN_HOSTNAME_VERIFICATION=dns), and not for a library's distribution: the DNS record that proves the organization controls the host name",
  },
);
export type HostnameVerification = Static<typeof HostnameVerification>;

export const Distribution = Type.Object({
  id: Uuid,
  hostname: Type.String({ examples: ["cdn.example.com"] }),
  origin_url: Type.String({ examples: ["https://origin.example.com"] }),
  default_ttl_s: Type.Integer(),
  status: StringEnum(DISTRIBUTION_STATUSES),
  created_at: Timestamp,
  updated_at: Timestamp,
  hostname_verification: Type.Optional(HostnameVerification),
});
export type Distribution = Static<typeof Distribution>;

const TtlField = Type.Integer({
  minimum: 0,
  maximum: MAX_TTL_S,
  description: "Seconds an object is fresh when the origin says nothing about freshness",
});

export const CreateDistributionBody = Type.Object({
  hostname: Type.String({
    pattern: HOSTNAME_PATTERN,
    description: "Host name viewers use; stored lower-case",
    ...expecting("a host name such as cdn.example.com"),
  }),
  origin_url: OriginUrl,
  default_ttl_s: Type.Optional({ ...TtlField, default: 3600 }),
});
export type CreateDistributionBody = Static<typeof CreateDistributionBody>;

export const UpdateDistributionBody = Type.Object({
  // A library distribution's own `media://` origin may be sent back unchanged (a client writing back
  // what it read); any change of it, or a `media://` origin anywhere else, is refused by the service.
  origin_url: Type.Optional({
    ...OriginUrl,
    pattern: "^([Hh][Tt][Tt][Pp][Ss]?|[Mm][Ee][Dd][Ii][Aa])://[^/?#\\s]",
  }),
  default_ttl_s: Type.Optional(TtlField),
  status: Type.Optional(StringEnum(DISTRIBUTION_STATUSES)),
});
export type UpdateDistributionBody = Static<typeof UpdateDistributionBody>;

export const MAX_PURGE_PATH_LENGTH = 2048;

/** A purge request: 1 to `maxPaths` paths (`CUMULO_MAX_PURGE_PATHS`, default 1000). */
export const PurgeBody = (maxPaths: number) =>
  Type.Object({
    paths: Type.Array(
      Type.String({
        pattern: "^/[^*]*\\*?$",
        maxLength: MAX_PURGE_PATH_LENGTH,
        ...expecting("a path starting with /, with * only as its last character (/images/*)"),
        description: "Starts with /; a trailing * purges every path with that prefix",
      }),
      { minItems: 1, maxItems: maxPaths },
    ),
  });
export type PurgeBody = Static<ReturnType<typeof PurgeBody>>;

export const Purge = Type.Object({
  id: Uuid,
  distribution_id: Uuid,
  paths: Type.Array(Type.String()),
  created_at: Timestamp,
});
export type Purge = Static<typeof Purge>;

export const METRICS = [
  "requests",
  "traffic",
  "cache_hit_traffic_ratio",
  "upstream_origin_time_ms",
  "responses_2xx",
  "responses_3xx",
  "responses_4xx",
  "responses_5xx",
] as const;
export type Metric = (typeof METRICS)[number];

export const GRANULARITIES = ["1m", "5m", "15m", "1h", "6h", "1d"] as const;
export type Granularity = (typeof GRANULARITIES)[number];

// Validated by the handler so that every failing parameter is reported in one response.
export const AnalyticsQuery = Type.Object({
  from: Type.Optional(Type.String({ description: "ISO 8601 start of the range (default: to - 24h)" })),
  to: Type.Optional(Type.String({ description: "ISO 8601 end of the range (default: now)" })),
  metrics: Type.Optional(
    Type.Array(Type.String(), {
      description: `Repeated or comma-separated; any of ${METRICS.join(", ")} (default: all)`,
    }),
  ),
  granularity: Type.Optional(
    Type.String({ description: `One of ${GRANULARITIES.join(", ")} (default 1h)`, examples: ["1h"] }),
  ),
  distribution: Type.Optional(
    Type.String({ description: "A distribution's host name (default: all of the organization's)" }),
  ),
});
export type AnalyticsQuery = Static<typeof AnalyticsQuery>;

/** One optional number per metric, under the metric's name. */
const metricFigures = Object.fromEntries(
  METRICS.map((metric) => [metric, Type.Optional(Type.Number())]),
) as Record<Metric, TOptional<TNumber>>;

export const Analytics = Type.Object({
  From: Type.String(),
  To: Type.String(),
  Metrics: Type.Array(Type.String()),
  Granularity: Type.String(),
  Distribution: Type.String(),
  // Each metric named (not `additionalProperties`): the serializer then writes a bucket without
  // walking its keys, the largest cost of an analytics answer (docs/performance.md, session 7).
  Data: Type.Array(
    Type.Object(
      { Timestamp: Type.String(), ...metricFigures },
      { additionalProperties: false, description: "Bucket start, then one number per metric asked for" },
    ),
  ),
});
export type Analytics = Static<typeof Analytics>;

export const EmptyObject = Type.Object({}, { additionalProperties: false });
