import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { ok } from "../../http/envelope.ts";
import { Envelope, IdParams, mediaErrorResponses } from "../../http/schemas.ts";
import { PlaybackToken, PlaybackTokenBody } from "../../video/schemas.ts";
import { DEFAULT_TOKEN_TTL_S, MAX_TOKEN_TTL_S } from "../../video/tokens.ts";
import { MASTER_PLAYLIST, MP4_FILE } from "../../video/transcoder.ts";
import { videoAssetUrl } from "../urls.ts";
import { type MediaRouteOptions, mediaSecurity, requireVideo } from "./common.ts";

/**
 * `/libraries/{libraryId}/videos/{videoId}/playback-token`: signed links for private playback. The
 * rules a viewer meets on the edge and the embed page are `video/access.ts`.
 */
export const playbackRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (
  app,
  { media, video, config },
) => {
  app.post(
    "/libraries/:libraryId/videos/:videoId/playback-token",
    {
      // Watching is reading: a read-only person previews a private video in the console.
      config: { forReadOnlyUsers: true },
      schema: {
        operationId: "createPlaybackToken",
        tags: ["media: videos"],
        summary: "Create a signed, expiring playback token",
        description: `Valid for every path under \`/{video_id}/\` on the library's distribution until \`expires\` (unix seconds). \`expires_in_s\` 1-${MAX_TOKEN_TTL_S}, default ${DEFAULT_TOKEN_TTL_S}. Needed to play videos of a library whose \`video_privacy\` is \`private\`.`,
        security: mediaSecurity,
        params: IdParams("libraryId", "videoId"),
        bodyOptional: true,
        body: PlaybackTokenBody,
        response: { ...mediaErrorResponses, 201: Envelope(PlaybackToken) },
      },
    },
    async (request, reply) => {
      const { libraryId, videoId } = request.params;
      const found = await requireVideo(media, request, libraryId, videoId);
      const { token, expires } = video.tokens.issue(
        found.id,
        request.body.expires_in_s ?? DEFAULT_TOKEN_TTL_S,
      );
      const query = new URLSearchParams({ token, expires: String(expires) }).toString();
      return reply.code(201).send(
        ok("Playback token created successfully", {
          token,
          expires,
          manifest_url: `${videoAssetUrl(config, libraryId, found.id, MASTER_PLAYLIST)}?${query}`,
          direct_play_url: `${videoAssetUrl(config, libraryId, found.id, MP4_FILE)}?${query}`,
        }),
      );
    },
  );
};
