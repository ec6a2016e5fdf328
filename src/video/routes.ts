import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { PassThrough, type Readable } from "node:stream";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyRequest, FastifySchemaCompiler } from "fastify";
import { type BlobStore, BlobTooLargeError } from "../blobs/store.ts";
import type { Config } from "../config.ts";
import { requireApiKey } from "../http/auth.ts";
import { ok } from "../http/envelope.ts";
import { ApiError } from "../http/errors.ts";
import { Envelope, IdParams, mediaErrorResponses, Nullable, Timestamp } from "../http/schemas.ts";
import { acceptUploads } from "../http/upload-bodies.ts";
import { validatorCompiler } from "../http/validation.ts";
import type { IdentityService } from "../identity/service.ts";
import type { MediaServices } from "../media/index.ts";
import { toVideo } from "../media/presenters.ts";
import { Video } from "../media/schemas.ts";
import { receiveMultipart } from "../media/uploads.ts";
import { videoAssetUrl } from "../media/urls.ts";
import type { VideoServices } from "./index.ts";
import { sourceKey } from "./pipeline.ts";
import { DEFAULT_TOKEN_TTL_S, MAX_TOKEN_TTL_S } from "./tokens.ts";
import { MASTER_PLAYLIST, MP4_FILE } from "./transcoder.ts";

export interface VideoRouteOptions {
  media: MediaServices;
  video: VideoServices;
  identity: IdentityService;
  config: Config;
}

const VideoParams = IdParams("libraryId", "videoId");
const security: Record<string, string[]>[] = [{ bearer: [] }, { apiKeyHeader: [] }];

const PlaybackTokenBody = Type.Object({
  expires_in_s: Type.Optional(
    Type.Integer({ minimum: 1, maximum: MAX_TOKEN_TTL_S, description: `Default ${DEFAULT_TOKEN_TTL_S}` }),
  ),
});
const PlaybackToken = Type.Object({
  token: Type.String(),
  expires: Type.Integer({ description: "Unix seconds" }),
  manifest_url: Type.String(),
  direct_play_url: Type.String(),
});
const Processing = Type.Object({
  video_id: Type.String(),
  status: Type.String(),
  failure_reason: Nullable(Type.String()),
  source_bytes: Type.Integer(),
  duration_s: Type.Number(),
  uploads: Type.Integer({ description: "How many sources were uploaded (the current one is the last)" }),
  updated_at: Nullable(Timestamp),
});

/** Raw request bodies of the source route, handed through unread by the content-type parser. */
const rawBodies = new WeakMap<FastifyRequest, IncomingMessage>();

/** The body is the file itself (read by the handler); only params validate. */
const documentedBodyOnly: FastifySchemaCompiler<object> = (route) =>
  route.httpPart === "body" ? () => true : validatorCompiler(route);

/** Streams a raw body into the blob store, stopping at `maxBytes`; the request is drained on failure. */
async function receiveRaw(raw: IncomingMessage, blobs: BlobStore, key: string, maxBytes: number) {
  const pass = new PassThrough();
  const onClose = () => {
    if (!raw.complete) pass.destroy(new Error("the upload was aborted"));
  };
  raw.once("close", onClose);
  raw.once("error", (error) => pass.destroy(error));
  raw.pipe(pass);
  try {
    return await blobs.put(key, pass as Readable, { maxBytes });
  } catch (error) {
    raw.unpipe(pass);
    raw.resume();
    if (error instanceof BlobTooLargeError) throw ApiError.payloadTooLarge();
    throw error;
  } finally {
    raw.off("close", onClose);
  }
}

/** Video source upload, processing state and playback tokens (under `/v1/media`). */
export const videoRoutes: FastifyPluginAsyncTypebox<VideoRouteOptions> = async (app, options) => {
  const { media, video, config } = options;
  const { blobs } = media.deps;
  requireApiKey(app, "media", options.identity);
  await acceptUploads(app, config);
  const handThrough = (request: FastifyRequest, payload: IncomingMessage, done: (error: null) => void) => {
    rawBodies.set(request, payload);
    done(null);
  };
  app.addContentTypeParser("application/octet-stream", handThrough);
  app.addContentTypeParser(/^video\/[a-z0-9.+-]+(?:\s*;.*)?$/i, handThrough);
  app.addHook("onSend", async (request, reply) => {
    // An answer given before the body was read (404, 413 by Content-Length...): the rest of the body
    // is discarded as it arrives and the connection is not reused, so nothing waits on it.
    const raw = request.raw;
    if (!raw.complete) {
      reply.header("connection", "close");
      raw.resume();
    }
  });

  async function requireVideo(request: FastifyRequest, libraryId: string, videoId: string) {
    const library = await media.libraries.find(request.auth.organizationId, libraryId);
    const found = library ? await media.videos.find(library.id, videoId) : undefined;
    if (!found) throw ApiError.notFound();
    return found;
  }

  app.put(
    "/libraries/:libraryId/videos/:videoId/source",
    {
      schema: {
        operationId: "uploadVideoSource",
        tags: ["media: videos"],
        summary: "Upload a video's source file",
        description: `The body is the file (\`Content-Type: video/*\` or \`application/octet-stream\`), or multipart/form-data with the file in \`file\`; at most ${config.limits.videoSourceBytes} bytes, streamed to storage. Answers 202 with the video in status \`uploading\`; processing follows in the background. A new upload replaces the previous source and its renditions.`,
        consumes: ["application/octet-stream", "video/mp4", "multipart/form-data"],
        security,
        params: VideoParams,
        body: Type.Object({ file: Type.String({ format: "binary" }) }),
        response: { ...mediaErrorResponses, 202: Envelope(Video) },
      },
      validatorCompiler: documentedBodyOnly,
    },
    async (request, reply) => {
      const { libraryId, videoId } = request.params;
      const found = await requireVideo(request, libraryId, videoId);
      const maxBytes = config.limits.videoSourceBytes;
      const key = sourceKey(libraryId, videoId, randomUUID());
      let upload: { key: string; sizeBytes: number };
      if (request.isMultipart()) {
        const form = await receiveMultipart(request, blobs, { fileField: "file", maxBytes, key: () => key });
        if (!form.file) {
          throw ApiError.field("file", "validation_required", "The file field is required.");
        }
        upload = form.file;
      } else {
        const raw = rawBodies.get(request);
        if (!raw) throw ApiError.unsupportedMediaType();
        const declared = Number(request.headers["content-length"] ?? Number.NaN);
        if (declared > maxBytes) throw ApiError.payloadTooLarge();
        upload = await receiveRaw(raw, blobs, key, maxBytes);
      }
      if (upload.sizeBytes === 0) {
        await blobs.delete(upload.key);
        throw ApiError.invalidRequest();
      }
      const updated = await video.pipeline.acceptSource(found, upload);
      if (!updated) {
        await blobs.delete(upload.key);
        throw ApiError.notFound();
      }
      return reply.code(202).send(ok("Video upload accepted, processing started", toVideo(updated)));
    },
  );

  app.get(
    "/libraries/:libraryId/videos/:videoId/processing",
    {
      schema: {
        operationId: "getVideoProcessing",
        tags: ["media: videos"],
        summary: "Processing state of a video's source, with the reason of a failure",
        security,
        params: VideoParams,
        response: { ...mediaErrorResponses, 200: Envelope(Processing) },
      },
    },
    async (request) => {
      const found = await requireVideo(request, request.params.libraryId, request.params.videoId);
      const row = await video.repository.find(found.id);
      return ok("Video processing retrieved successfully", {
        video_id: found.id,
        status: found.status,
        failure_reason: row?.failure_reason ?? null,
        source_bytes: Number(row?.source_bytes ?? 0),
        duration_s: Number(row?.duration_s ?? 0),
        uploads: Number(row?.generation ?? 0),
        updated_at: row?.updated_at ?? null,
      });
    },
  );

  app.post(
    "/libraries/:libraryId/videos/:videoId/playback-token",
    {
      schema: {
        operationId: "createPlaybackToken",
        tags: ["media: videos"],
        summary: "Create a signed, expiring playback token",
        description: `Valid for every path under \`/{video_id}/\` on the library's distribution until \`expires\` (unix seconds). \`expires_in_s\` 1-${MAX_TOKEN_TTL_S}, default ${DEFAULT_TOKEN_TTL_S}. Needed to play videos of a library whose \`video_privacy\` is \`private\`.`,
        security,
        params: VideoParams,
        body: PlaybackTokenBody,
        response: { ...mediaErrorResponses, 201: Envelope(PlaybackToken) },
      },
    },
    async (request, reply) => {
      const { libraryId, videoId } = request.params;
      const found = await requireVideo(request, libraryId, videoId);
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
