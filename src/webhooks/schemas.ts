import { type Static, type TObject, type TRecord, Type } from "@sinclair/typebox";
import { expecting, NonBlankString, Nullable, PageQuery, StringEnum, Uuid } from "../http/schemas.ts";
import { VIDEO_EVENTS } from "./emitter.ts";
import { MAX_RETRY_DELAY_S } from "./schedule.ts";

export const SUBSCRIBABLE_EVENTS = [...VIDEO_EVENTS, "*"] as const;
export const DELIVERY_EVENTS = [...VIDEO_EVENTS, "test"] as const;

const OffsetTimestamp = Type.String({
  format: "date-time",
  examples: ["2026-11-21T08:30:00.123+00:00"],
});

export const RetryPolicySchema = Type.Object(
  {
    max_attempts: Type.Integer({ minimum: 1, maximum: 20, default: 8, description: "Attempts in all" }),
    initial_delay_s: Type.Number({
      exclusiveMinimum: 0,
      maximum: MAX_RETRY_DELAY_S,
      default: 5,
      description: "Wait after the first attempt, seconds (fractions allowed; at most 30 days)",
    }),
    multiplier: Type.Number({
      minimum: 1,
      maximum: 100,
      default: 2,
      description: "Each wait is the previous one times this (at most 100)",
    }),
    max_delay_s: Type.Number({
      exclusiveMinimum: 0,
      maximum: MAX_RETRY_DELAY_S,
      default: 36_000,
      description: "Longest wait, seconds (at most 30 days)",
    }),
  },
  { description: "Replaces the default schedule; omitted fields take the defaults shown" },
);

// Names: RFC 9110 token characters. Values: visible characters of Latin-1 (what a header's bytes
// carry), spaces and tabs only, no line breaks that could smuggle a second header.
const Headers = Type.Record(
  Type.String(),
  Type.String({
    maxLength: 4096,
    pattern: "^[\\t\\x20-\\x7e\\x80-\\xff]*$",
    ...expecting(
      "a header value of Latin-1 characters (U+0020-U+00FF or tab), without line breaks or other control characters",
    ),
  }),
  {
    propertyNames: {
      pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$",
      ...expecting("a header name of letters, digits and ! # $ % & ' * + . ^ _ ` | ~ -"),
    },
    maxProperties: 50,
    description: "Sent with every delivery; they never replace the signing headers, Content-Type or Host",
  },
);

/** What an endpoint URL takes, in its validation errors (the schema's and the service's alike). */
export const ENDPOINT_URL_WORDS = "an http or https URL without spaces, such as https://example.com/webhooks";

// The scheme and a host are checked here so a bad URL is reported with the other fields' errors;
// the service then parses it fully and checks where it resolves to.
const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  pattern: "^[Hh][Tt][Tt][Pp][Ss]?://[^\\s/?#]+([/?#]\\S*)?$",
  description: "http or https address",
  ...expecting(ENDPOINT_URL_WORDS),
});
const Events = Type.Array(StringEnum(SUBSCRIBABLE_EVENTS), { minItems: 1, maxItems: 20 });
const Name = NonBlankString(255);

/** `T` or null, as one schema (`type: [object, null]`), so a bad field of T is reported once, by its own path. */
const OrNull = <T extends TObject | TRecord>(schema: T) =>
  Type.Unsafe<Static<T> | null>({ ...schema, type: ["object", "null"] });

export const CreateEndpointBody = Type.Object({
  name: Name,
  url: Url,
  events: Events,
  headers: Type.Optional(OrNull(Headers)),
  retry_policy: Type.Optional(OrNull(RetryPolicySchema)),
  is_active: Type.Optional(Type.Boolean({ default: true })),
});
export type CreateEndpointBody = Static<typeof CreateEndpointBody>;

export const UpdateEndpointBody = Type.Object({
  name: Type.Optional(Name),
  url: Type.Optional(Url),
  events: Type.Optional(Events),
  headers: Type.Optional(OrNull(Headers)),
  retry_policy: Type.Optional(OrNull(RetryPolicySchema)),
  is_active: Type.Optional(Type.Boolean()),
});
export type UpdateEndpointBody = Static<typeof UpdateEndpointBody>;

/** The longest overlap a rotation may ask for: 7 days. */
export const MAX_PREVIOUS_SECRET_EXPIRY_S = 7 * 24 * 60 * 60;

export const RotateSecretBody = Type.Object({
  previous_secret_expires_in_s: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: MAX_PREVIOUS_SECRET_EXPIRY_S,
      default: 0,
      description:
        "Seconds the replaced secret keeps signing deliveries, after the new one (webhook-signature then holds two signatures); 0 replaces it at once",
    }),
  ),
});
export type RotateSecretBody = Static<typeof RotateSecretBody>;

export const WebhookEndpoint = Type.Object({
  id: Uuid,
  library_id: Uuid,
  organization_id: Uuid,
  name: Type.String(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  headers: Nullable(Type.Record(Type.String(), Type.String())),
  retry_policy: Nullable(
    Type.Object({
      max_attempts: Type.Integer(),
      initial_delay_s: Type.Number(),
      multiplier: Type.Number(),
      max_delay_s: Type.Number(),
    }),
  ),
  secret: Nullable(
    Type.String({ description: "whsec_ + base64 signing key; null for a read-only key (docs/security.md)" }),
  ),
  previous_secret_expires_at: Type.Optional(
    Type.String({
      format: "date-time",
      description:
        "Until when the secret replaced by the last rotation still signs deliveries; absent when none does",
    }),
  ),
  is_active: Type.Boolean(),
  created_by: Nullable(Uuid),
  updated_by: Nullable(Uuid),
  created_at: OffsetTimestamp,
  updated_at: OffsetTimestamp,
});
export type WebhookEndpoint = Static<typeof WebhookEndpoint>;

/**
 * The endpoint as the writes (create, update, rotate-secret) answer it: read-only keys may not make
 * them, so the secret is always there (the same JSON; the typed client need not check it for null).
 */
export const WebhookEndpointWithSecret = Type.Object({
  ...WebhookEndpoint.properties,
  secret: Type.String({ description: "whsec_ + base64 signing key" }),
});
export type WebhookEndpointWithSecret = Static<typeof WebhookEndpointWithSecret>;

/** The video data of a notification, as SPEC.md (Events) names its fields. */
export const VideoEventData = Type.Object({
  status: Type.String(),
  duration: Type.Integer(),
  formatted_duration: Type.String(),
  video_id: Type.String(),
  client_id: Type.String(),
  libraryId: Type.String(),
  manifest_url: Type.String(),
  thumbnail_url: Type.String(),
  thumbnail_count: Type.Integer(),
  direct_play_url: Type.String(),
  preview_animation_thumbnail_url: Type.String(),
});
export type VideoEventData = Static<typeof VideoEventData>;

export const WebhookDelivery = Type.Object({
  id: Uuid,
  created_at: OffsetTimestamp,
  next_retry_at: Type.Optional(OffsetTimestamp),
  webhook_endpoint_id: Uuid,
  webhook_endpoint: WebhookEndpoint,
  video_id: Nullable(Uuid),
  library_id: Uuid,
  payload: Type.Object(
    {
      event: Type.String(),
      event_type: Type.String(),
      notification_time: Type.Integer(),
      // Each field optional: a `test` notification's payload is `{}`, and the answer is made from
      // the body as stored, which the serializer must not refuse for a field it lacks.
      payload: Type.Partial(VideoEventData, {
        additionalProperties: true,
        description: "The video's data (SPEC.md, Events); empty for a test notification",
      }),
    },
    { additionalProperties: true },
  ),
  event: Type.String(),
  response_status: Type.Integer({ description: "The receiver's HTTP status; 0 when no answer came" }),
  response_body: Type.String(),
  error: Type.Optional(Type.String()),
  attempt: Type.Integer(),
  duration_ms: Type.Integer(),
  success: Type.Boolean(),
});
export type WebhookDelivery = Static<typeof WebhookDelivery>;

/** What the test and retry routes answer: the attempt they queued. */
export const QueuedDelivery = Type.Object({
  id: Uuid,
  webhook_id: Type.String({ description: "The message id sent as webhook-id" }),
  webhook_endpoint_id: Uuid,
  event: Type.String(),
  attempt: Type.Integer(),
});
export type QueuedDelivery = Static<typeof QueuedDelivery>;

export const DeliveryQuery = Type.Object({
  ...PageQuery.properties,
  event: Type.Optional(StringEnum(DELIVERY_EVENTS)),
  success: Type.Optional(Type.Boolean()),
});
export type DeliveryQuery = Static<typeof DeliveryQuery>;
