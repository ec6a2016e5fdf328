import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { Config } from "../../config.ts";
import { createdAt, ok, okList, okMessage, routePath } from "../../http/envelope.ts";
import { ApiError } from "../../http/errors.ts";
import { pageMeta, toPage } from "../../http/pagination.ts";
import {
  CreatedEnvelope,
  Envelope,
  IdParams,
  ListEnvelope,
  MessageOnly,
  mediaErrorResponses,
} from "../../http/schemas.ts";
import { toVideo } from "../presenters.ts";
import { CreateVideoBody, UpdateVideoBody, Video, VideoListQuery } from "../schemas.ts";
import type { VideoOutcome } from "../video-service.ts";
import { type MediaRouteOptions, mediaSecurity, requireLibrary } from "./common.ts";

const tags = ["media: videos"];
const LibraryParams = IdParams("libraryId");
const VideoParams = IdParams("libraryId", "videoId");

function videoOf(result: VideoOutcome, config: Config) {
  switch (result.outcome) {
    case "created":
    case "updated":
      return toVideo(result.video, config);
    case "not_found":
    case "folder_not_found":
      throw ApiError.notFound();
  }
}

export const videoRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (app, { media, config }) => {
  app.post(
    "/libraries/:libraryId/videos",
    {
      schema: {
        operationId: "createVideo",
        tags,
        summary: "Create a video",
        description:
          "The video starts in status `created`; uploading its source moves it through processing. `folder_id` must be a folder of the library (else 404).",
        security: mediaSecurity,
        params: LibraryParams,
        body: CreateVideoBody,
        response: { ...mediaErrorResponses, 201: CreatedEnvelope(Video) },
      },
    },
    async (request, reply) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const video = videoOf(await media.videos.create(library, request.body), config);
      return reply
        .code(201)
        .header("location", createdAt(request, video.id))
        .send(ok("Video created successfully", video));
    },
  );

  app.get(
    "/libraries/:libraryId/videos",
    {
      config: { storedDataOnly: true },
      schema: {
        operationId: "listVideos",
        tags,
        summary: "List videos",
        security: mediaSecurity,
        params: LibraryParams,
        querystring: VideoListQuery,
        response: { ...mediaErrorResponses, 200: ListEnvelope(Video) },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const { query } = request;
      const { rows, total } = await media.videos.list(
        library.id,
        {
          ...(query.folder_id ? { folderId: query.folder_id } : {}),
          ...(query.status ? { status: query.status } : {}),
        },
        toPage(query),
      );
      return okList(
        "Videos retrieved successfully",
        rows.map((row) => toVideo(row, config)),
        pageMeta(routePath(request), query, total, { folder_id: query.folder_id, status: query.status }),
      );
    },
  );

  app.get(
    "/libraries/:libraryId/videos/:videoId",
    {
      config: { storedDataOnly: true },
      schema: {
        operationId: "getVideo",
        tags,
        summary: "Get a video",
        security: mediaSecurity,
        params: VideoParams,
        response: { ...mediaErrorResponses, 200: Envelope(Video) },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const video = await media.videos.find(library.id, request.params.videoId);
      if (!video) throw ApiError.notFound();
      return ok("Video retrieved successfully", toVideo(video, config));
    },
  );

  app.patch(
    "/libraries/:libraryId/videos/:videoId",
    {
      schema: {
        operationId: "updateVideo",
        tags,
        summary: "Update a video's title, description or folder",
        description: "`folder_id: null` moves the video out of its folder.",
        security: mediaSecurity,
        params: VideoParams,
        body: UpdateVideoBody,
        response: { ...mediaErrorResponses, 200: Envelope(Video) },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const video = videoOf(
        await media.videos.update(library.id, request.params.videoId, request.body),
        config,
      );
      return ok("Video updated successfully", video);
    },
  );

  app.delete(
    "/libraries/:libraryId/videos/:videoId",
    {
      schema: {
        operationId: "deleteVideo",
        tags,
        summary: "Delete a video with its subtitles, thumbnails and files",
        security: mediaSecurity,
        params: VideoParams,
        response: { ...mediaErrorResponses, 200: MessageOnly },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const result = await media.videos.delete(library.id, request.params.videoId);
      switch (result.outcome) {
        case "deleted":
          return okMessage("Video deleted successfully");
        case "not_found":
          throw ApiError.notFound();
      }
    },
  );
};
