import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { okMessage } from "../../http/envelope.ts";
import { ApiError } from "../../http/errors.ts";
import { IdParams, MessageOnly, mediaErrorResponses } from "../../http/schemas.ts";
import { receiveMultipart } from "../uploads.ts";
import { type MediaRouteOptions, mediaSecurity, requireVideo } from "./common.ts";
import { BinaryFile, documentedBodyOnly } from "./multipart-forms.ts";

/** `/libraries/{libraryId}/videos/{videoId}/thumbnails`: a video's uploaded thumbnail image. */
export const thumbnailRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (
  app,
  { media, config },
) => {
  app.post(
    "/libraries/:libraryId/videos/:videoId/thumbnails",
    {
      schema: {
        operationId: "uploadThumbnail",
        tags: ["media: thumbnails"],
        summary: "Upload a video's thumbnail (multipart: file)",
        description: `A .jpg, .jpeg, .png or .gif whose content matches its extension, at most ${config.limits.thumbnailBytes} bytes. Sets the video's \`thumbnail_url\`.`,
        consumes: ["multipart/form-data"],
        security: mediaSecurity,
        params: IdParams("libraryId", "videoId"),
        body: Type.Object({ file: BinaryFile }),
        response: { ...mediaErrorResponses, 200: MessageOnly },
      },
      validatorCompiler: documentedBodyOnly,
    },
    async (request) => {
      const video = await requireVideo(media, request, request.params.libraryId, request.params.videoId);
      const form = await receiveMultipart(request, media.deps, {
        fileField: "file",
        maxBytes: config.limits.thumbnailBytes,
        key: () => media.thumbnails.fileKey(video),
      });
      const result = await media.thumbnails.upload(video, form);
      switch (result.outcome) {
        case "uploaded":
          return okMessage("Thumbnail uploaded successfully");
        case "not_found":
          throw ApiError.notFound();
        case "invalid":
          throw ApiError.validation(result.errors);
      }
    },
  );
};
