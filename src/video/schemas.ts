import { Type } from "@sinclair/typebox";
import { Nullable, Timestamp } from "../http/schemas.ts";
import { DEFAULT_TOKEN_TTL_S, MAX_TOKEN_TTL_S } from "./tokens.ts";

export const PlaybackTokenBody = Type.Object({
  expires_in_s: Type.Optional(
    Type.Integer({ minimum: 1, maximum: MAX_TOKEN_TTL_S, description: `Default ${DEFAULT_TOKEN_TTL_S}` }),
  ),
});

export const PlaybackToken = Type.Object({
  token: Type.String(),
  expires: Type.Integer({ description: "Unix seconds" }),
  manifest_url: Type.String(),
  direct_play_url: Type.String(),
});

export const Processing = Type.Object({
  video_id: Type.String(),
  status: Type.String(),
  failure_reason: Nullable(Type.String()),
  source_bytes: Type.Integer(),
  duration_s: Type.Number(),
  uploads: Type.Integer({ description: "How many sources were uploaded (the current one is the last)" }),
  updated_at: Nullable(Timestamp),
});
