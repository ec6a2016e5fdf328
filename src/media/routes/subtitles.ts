import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { ok, okList, okMessage, routePath } from "../../http/envelope.ts";
import { ApiError } from "../../http/errors.ts";
import { pageMeta, toPage } from "../../http/pagination.ts";
import {
  Envelope,
  IdParams,
  ListEnvelope,
  MessageOnly,
  mediaErrorResponses,
  NonBlankString,
  PageQuery,
} from "../../http/schemas.ts";
import { toSubtitle } from "../presenters.ts";
import { Subtitle } from "../schemas.ts";
import type { SubtitleOutcome } from "../subtitle-service.ts";
import { receiveMultipart } from "../uploads.ts";
import { type MediaRouteOptions, mediaSecurity, requireVideo } from "./common.ts";
import { BinaryFile, documentedBodyOnly } from "./multipart-forms.ts";

const tags = ["media: subtitles"];
const VideoParams = IdParams("libraryId", "videoId");
const SubtitleParams = IdParams("libraryId", "videoId", "subtitleId");
const SubtitleForm = Type.Object({
  title: NonBlankString(255),
  language: Type.String({ description: "BCP 47 language tag", examples: ["en", "pt-BR", "zh-Hans"] }),
  file: BinaryFile,
});
const SubtitleUpdateForm = Type.Partial(SubtitleForm, { description: "At least one of the fields." });

function subtitleOf(result: SubtitleOutcome<"created" | "updated">) {
  switch (result.outcome) {
    case "created":
    case "updated":
      return toSubtitle(result.subtitle);
    case "not_found":
      throw ApiError.notFound();
    case "invalid":
      throw ApiError.validation(result.errors);
  }
}

/** `/libraries/{libraryId}/videos/{videoId}/subtitles` (multipart uploads of WebVTT or SRT files). */
export const subtitleRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (
  app,
  { media, config },
) => {
  const upload = { fileField: "file", maxBytes: config.limits.subtitleBytes };

  app.post(
    "/libraries/:libraryId/videos/:videoId/subtitles",
    {
      schema: {
        operationId: "createSubtitle",
        tags,
        summary: "Add a subtitle (multipart: title, language, file)",
        description: `\`language\` is a BCP 47 tag; \`file\` is WebVTT or SRT (checked by content), at most ${config.limits.subtitleBytes} bytes.`,
        consumes: ["multipart/form-data"],
        security: mediaSecurity,
        params: VideoParams,
        body: SubtitleForm,
        response: { ...mediaErrorResponses, 201: Envelope(Subtitle) },
      },
      validatorCompiler: documentedBodyOnly,
    },
    async (request, reply) => {
      const video = await requireVideo(media, request, request.params.libraryId, request.params.videoId);
      const form = await receiveMultipart(request, media.deps, {
        ...upload,
        key: () => media.subtitles.fileKey(video),
      });
      const subtitle = subtitleOf(await media.subtitles.create(video, form));
      return reply.code(201).send(ok("Subtitle created successfully", subtitle));
    },
  );

  app.get(
    "/libraries/:libraryId/videos/:videoId/subtitles",
    {
      config: { storedDataOnly: true },
      schema: {
        operationId: "listSubtitles",
        tags,
        summary: "List a video's subtitles",
        security: mediaSecurity,
        params: VideoParams,
        querystring: PageQuery,
        response: { ...mediaErrorResponses, 200: ListEnvelope(Subtitle) },
      },
    },
    async (request) => {
      const video = await requireVideo(media, request, request.params.libraryId, request.params.videoId);
      const { rows, total } = await media.subtitles.list(video.id, toPage(request.query));
      return okList(
        "Subtitles retrieved successfully",
        rows.map(toSubtitle),
        pageMeta(routePath(request), request.query, total),
      );
    },
  );

  app.get(
    "/libraries/:libraryId/videos/:videoId/subtitles/:subtitleId",
    {
      config: { storedDataOnly: true },
      schema: {
        operationId: "getSubtitle",
        tags,
        summary: "Get a subtitle",
        security: mediaSecurity,
        params: SubtitleParams,
        response: { ...mediaErrorResponses, 200: Envelope(Subtitle) },
      },
    },
    async (request) => {
      const { libraryId, videoId, subtitleId } = request.params;
      const video = await requireVideo(media, request, libraryId, videoId);
      const subtitle = await media.subtitles.find(video.id, subtitleId);
      if (!subtitle) throw ApiError.notFound();
      return ok("Subtitle retrieved successfully", toSubtitle(subtitle));
    },
  );

  app.put(
    "/libraries/:libraryId/videos/:videoId/subtitles/:subtitleId",
    {
      schema: {
        operationId: "updateSubtitle",
        tags,
        summary: "Update a subtitle (multipart: any of title, language, file)",
        description: "At least one of the three; when none is given each is `validation_required`.",
        consumes: ["multipart/form-data"],
        security: mediaSecurity,
        params: SubtitleParams,
        body: SubtitleUpdateForm,
        response: { ...mediaErrorResponses, 200: Envelope(Subtitle) },
      },
      validatorCompiler: documentedBodyOnly,
    },
    async (request) => {
      const { libraryId, videoId, subtitleId } = request.params;
      const video = await requireVideo(media, request, libraryId, videoId);
      // An unknown subtitle is 404 before any of the body is stored.
      if (!(await media.subtitles.find(video.id, subtitleId))) throw ApiError.notFound();
      const form = await receiveMultipart(request, media.deps, {
        ...upload,
        key: () => media.subtitles.fileKey(video),
      });
      const subtitle = subtitleOf(await media.subtitles.update(video.id, subtitleId, form));
      return ok("Subtitle updated successfully", subtitle);
    },
  );

  app.delete(
    "/libraries/:libraryId/videos/:videoId/subtitles/:subtitleId",
    {
      schema: {
        operationId: "deleteSubtitle",
        tags,
        summary: "Delete a subtitle",
        security: mediaSecurity,
        params: SubtitleParams,
        response: { ...mediaErrorResponses, 200: MessageOnly },
      },
    },
    async (request) => {
      const { libraryId, videoId, subtitleId } = request.params;
      const video = await requireVideo(media, request, libraryId, videoId);
      const result = await media.subtitles.delete(video.id, subtitleId);
      switch (result.outcome) {
        case "deleted":
          return okMessage("Subtitle deleted successfully");
        case "not_found":
          throw ApiError.notFound();
      }
    },
  );
};
