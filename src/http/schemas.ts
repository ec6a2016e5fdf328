import { type Static, type TSchema, Type } from "@sinclair/typebox";
import { LINE_PATTERN, NAME_FORMAT, NAME_PATTERN } from "../text.ts";

/**
 * The annotation that says in words what a string with a `pattern` takes ("a host name such as
 * cdn.example.com"): its validation error reads "The hostname field has an invalid format. It must be
 * a host name such as cdn.example.com." (`src/http/validation.ts`). Shown in the OpenAPI document too.
 */
export const EXPECTED = "x-expected";

/** `EXPECTED` as schema options: `Type.String({ pattern, ...expecting("a hex colour such as #3b82f6") })`. */
export const expecting = (words: string) => ({ [EXPECTED]: words });

/**
 * The annotation that says what a number outside its bounds should have been, where the bounds are
 * the store's and not the caller's business (a row id past 32 bits names nothing): its validation
 * error reads "The billing_account_id field must name a billing account of your organization."
 */
export const OUT_OF_RANGE = "x-out-of-range";

/** `OUT_OF_RANGE` as schema options: `Type.Integer({ maximum, ...outOfRange("must name ...") })`. */
export const outOfRange = (words: string) => ({ [OUT_OF_RANGE]: words });

export const Uuid = Type.String({ format: "uuid" });

/**
 * An http(s) URL with a host, checked by the schema so a bad one is reported with the body's other
 * field errors (a CDN origin, a URL import); the service then parses it and checks where it resolves.
 */
export const HttpUrl = (options: { description: string; expected: string; examples?: string[] }) =>
  Type.String({
    minLength: 1,
    maxLength: 2048,
    pattern: "^[Hh][Tt][Tt][Pp][Ss]?://[^/?#\\s]",
    description: options.description,
    ...expecting(options.expected),
    ...(options.examples ? { examples: options.examples } : {}),
  });

/**
 * A required name or title: 1 to `maxLength` characters on one line, not all of them white space,
 * none a control character (`NAME_PATTERN`). A blank one fails the pattern, which the OpenAPI
 * document shows; its error reads as an empty one's (`validation_min`, "must not be empty":
 * src/http/validation.ts). One with a control character is `validation_format`.
 */
export const NonBlankString = (maxLength: number) =>
  Type.String({
    minLength: 1,
    maxLength,
    pattern: NAME_PATTERN,
    ...expecting(NAME_FORMAT),
  });

/**
 * A label that may be empty (a cloud resource's display name): up to `maxLength` characters on one
 * line, none a control character, as `NonBlankString` (`validation_format` otherwise).
 */
export const SingleLineString = (maxLength: number, options: { minLength?: number; default?: string } = {}) =>
  Type.String({ ...options, maxLength, pattern: LINE_PATTERN, ...expecting(NAME_FORMAT) });

/** What a time filter or range bound takes (a timestamp or a whole day), in its validation errors. */
export const TIME_OR_DAY_WORDS =
  "an ISO 8601 timestamp such as 2026-11-21T08:30:00Z, or a date such as 2026-11-21";
export const Timestamp = Type.String({ format: "date-time", examples: ["2026-11-21T08:30:00.123Z"] });

/** A string limited to listed values; validates as `enum`, so a wrong type stays a type error. */
export const StringEnum = <const T extends readonly string[]>(
  values: T,
  options: { default?: T[number]; description?: string } = {},
) => Type.Unsafe<T[number]>({ type: "string", enum: [...values], ...options });

/** A response that is not JSON: its media type and a string schema, as the OpenAPI document shows it. */
export const TextResponse = (mediaType: string, description: string) => ({
  description,
  content: { [mediaType]: { schema: Type.String() } },
});

export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

export const IdParams = <K extends string>(...names: K[]) =>
  Type.Object(Object.fromEntries(names.map((name) => [name, Uuid])) as Record<K, typeof Uuid>);

const MAX_PAGE_SIZE = 100;
/** The last page whose row offset, at the largest page size, is still an exact integer in JavaScript. */
const MAX_PAGE = Math.floor(Number.MAX_SAFE_INTEGER / MAX_PAGE_SIZE);

export const PageQuery = Type.Object({
  limit: Type.Integer({
    minimum: 1,
    maximum: MAX_PAGE_SIZE,
    default: 20,
    description: `Items per page (1-${MAX_PAGE_SIZE})`,
  }),
  // Any page past the end is empty; the bound only keeps the row offset exact.
  page: Type.Integer({ minimum: 1, maximum: MAX_PAGE, default: 1, description: "Page number, from 1" }),
});
export type PageQuery = Static<typeof PageQuery>;

export const PageMeta = Type.Object({
  pagination: Type.Object({
    page: Type.Integer(),
    page_size: Type.Integer(),
    total: Type.Integer(),
    total_pages: Type.Integer(),
  }),
  links: Type.Object({ self: Type.String(), first: Type.String(), last: Type.String() }),
});
export type PageMeta = Static<typeof PageMeta>;

/** Media, CDN and livestream success body: `{success, message, data}`. */
export const Envelope = <T extends TSchema>(data: T) =>
  Type.Object({ success: Type.Literal(true), message: Type.String(), data });

/** A 201's envelope, with the `Location` header that names the created resource (OpenAPI only). */
export const CreatedEnvelope = <T extends TSchema>(data: T) => ({
  ...Envelope(data),
  headers: { location: { type: "string", description: "Path of the created resource" } },
});

export const ListEnvelope = <T extends TSchema>(item: T) =>
  Type.Object({
    success: Type.Literal(true),
    message: Type.String(),
    data: Type.Array(item),
    meta: PageMeta,
  });

export const MessageOnly = Type.Object({ success: Type.Boolean(), message: Type.String() });

const FieldErrorSchema = Type.Object({ field: Type.String(), code: Type.String(), message: Type.String() });

export const MediaError = Type.Object({
  success: Type.Literal(false),
  message: Type.String(),
  error: Type.Optional(Type.String()),
  code: Type.Optional(Type.String()),
  errors: Type.Optional(Type.Array(FieldErrorSchema)),
});

export const CloudError = Type.Object({
  message: Type.String(),
  error: Type.Optional(Type.String()),
  errors: Type.Optional(Type.Record(Type.String(), Type.String())),
});

/**
 * 503: the store, Redis or media storage is away for a moment (docs/decisions.md); any route may
 * answer it. 408, 414 and 431: the listener answers them before routing, for any path, in the path's
 * group's shape (a request too slow, a URL or a header section too long; src/http/listener.ts).
 */
const statuses = [400, 401, 403, 404, 408, 409, 413, 414, 415, 429, 431, 500, 503] as const;

/** Headers of a 503 and of every 429 (OpenAPI only). */
const RETRY_AFTER = {
  "retry-after": { type: "integer", description: "Seconds to wait before trying again" },
};
/** Headers of a 429 for the key's request budget (CONTRACT.md; a 429 for other reasons has `Retry-After` only). */
const RATE_LIMITED = {
  ...RETRY_AFTER,
  "ratelimit-limit": { type: "integer", description: "Requests the key may make per window" },
  "ratelimit-remaining": { type: "integer", description: "Requests left in this window" },
  "ratelimit-reset": { type: "integer", description: "Seconds until the window ends" },
};

/** The error responses of every route of a group, in its error shape, with the headers that go with them. */
function errorResponses<T extends TSchema>(error: T): Record<(typeof statuses)[number], T> {
  const responses: Record<number, T> = Object.fromEntries(statuses.map((status) => [status, error]));
  responses[429] = { ...error, headers: RATE_LIMITED };
  responses[503] = { ...error, headers: RETRY_AFTER };
  return responses;
}

/** Error responses every media-style route declares (spread into `response`). */
export const mediaErrorResponses = errorResponses(MediaError);

/** Error responses every cloud route declares. */
export const cloudErrorResponses = errorResponses(CloudError);
