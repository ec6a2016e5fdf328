import type { IncomingMessage } from "node:http";
import { PassThrough, type Readable } from "node:stream";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifyRequest } from "fastify";
import { type BlobStore, BlobTooLargeError } from "../../blobs/store.ts";
import { ok } from "../../http/envelope.ts";
import { ApiError } from "../../http/errors.ts";
import { sendsBody } from "../../http/json-bodies.ts";
import { Envelope, IdParams, mediaErrorResponses } from "../../http/schemas.ts";
import { Processing } from "../../video/schemas.ts";
import { toVideo } from "../presenters.ts";
import { emptyField, requiredField } from "../received-files.ts";
import { Video } from "../schemas.ts";
import { receiveMultipart } from "../uploads.ts";
import { type MediaRouteOptions, mediaSecurity, requireVideo } from "./common.ts";
import { BinaryFile, documentedBodyOnly } from "./multipart-forms.ts";

const VideoParams = IdParams("libraryId", "videoId");

/** Raw request bodies of the source route, handed through unread by the content-type parser. */
const rawBodies = new WeakMap<FastifyRequest, IncomingMessage>();

/** Streams a raw body into the blob store, stopping at `maxBytes`; the request is drained on failure. */
async function receiveRaw(raw: IncomingMessage, blobs: BlobStore, key: string, maxBytes: number) {
  const pass = new PassThrough();
  // The store reads `pass` from its own point on (after creating its folder, say): a hang-up before
  // then would be an error event nobody listens to, which ends the process. It fails the put anyway.
  pass.on("error", () => undefined);
  let hungUp = false;
  // Once the whole body has arrived, the connection ending (the parser refusing a request sent after
  // it, say) no longer concerns the upload: the request's late "aborted" error is not passed on.
  const onEnded = (error?: Error) => {
    if (raw.complete) return;
    hungUp = true;
    pass.destroy(error ?? new Error("the upload was aborted"));
  };
  const onClose = () => onEnded();
  raw.once("close", onClose);
  raw.on("error", onEnded);
  raw.pipe(pass);
  try {
    return await blobs.put(key, pass as Readable, { maxBytes });
  } catch (error) {
    raw.unpipe(pass);
    raw.resume();
    if (error instanceof BlobTooLargeError) throw ApiError.payloadTooLarge();
    // The client hung up before the whole body arrived: its doing, and nobody is left to answer.
    if (hungUp) throw ApiError.invalidRequest();
    throw error;
  } finally {
    raw.off("close", onClose);
    raw.off("error", onEnded);
  }
}

/**
 * `/libraries/{libraryId}/videos/{videoId}/source` (the upload, raw or multipart) and `/processing`
 * (what became of it). Registered where `@fastify/multipart` is.
 */
export const videoSourceRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (
  app,
  { media, video, config },
) => {
  const { blobs } = media.deps;
  const handThrough = (request: FastifyRequest, payload: IncomingMessage, done: (error: null) => void) => {
    rawBodies.set(request, payload);
    done(null);
  };
  app.addContentTypeParser("application/octet-stream", handThrough);
  app.addContentTypeParser(/^video\/[a-z0-9.+-]+(?:\s*;.*)?$/i, handThrough);

  app.put(
    "/libraries/:libraryId/videos/:videoId/source",
    {
      schema: {
        operationId: "uploadVideoSource",
        tags: ["media: videos"],
        summary: "Upload a video's source file",
        description: `The body is the file (\`Content-Type: video/*\` or \`application/octet-stream\`), or multipart/form-data with the file in \`file\`; at most ${config.limits.videoSourceBytes} bytes, streamed to storage. Answers 202 with the video in status \`uploading\`; processing follows in the background. A new upload replaces the previous source and its renditions.`,
        consumes: ["application/octet-stream", "video/mp4", "multipart/form-data"],
        security: mediaSecurity,
        params: VideoParams,
        body: Type.Object({ file: BinaryFile }),
        response: { ...mediaErrorResponses, 202: Envelope(Video) },
      },
      validatorCompiler: documentedBodyOnly,
    },
    async (request, reply) => {
      const found = await requireVideo(media, request, request.params.libraryId, request.params.videoId);
      const maxBytes = config.limits.videoSourceBytes;
      const key = video.pipeline.sourceKey(found);
      let upload: { key: string; sizeBytes: number };
      if (request.isMultipart()) {
        const form = await receiveMultipart(request, media.deps, {
          fileField: "file",
          maxBytes,
          key: () => key,
        });
        if (!form.file) throw ApiError.validation([requiredField("file")]);
        upload = form.file;
      } else {
        const raw = rawBodies.get(request);
        // No body at all names the missing file, as a multipart body without it does.
        if (!raw) {
          throw sendsBody(request)
            ? ApiError.unsupportedMediaType()
            : ApiError.validation([requiredField("file")]);
        }
        const declared = Number(request.headers["content-length"] ?? Number.NaN);
        if (declared > maxBytes) throw ApiError.payloadTooLarge();
        upload = await receiveRaw(raw, blobs, key, maxBytes);
      }
      const result = await video.pipeline.acceptSource(found, upload);
      switch (result.outcome) {
        case "accepted":
          return reply
            .code(202)
            .send(ok("Video upload accepted, processing started", toVideo(result.video, config)));
        // Raw or multipart, an upload without a byte is a file sent empty, as a subtitle's says.
        case "empty":
          throw ApiError.validation([emptyField("file")]);
        case "not_found":
          throw ApiError.notFound();
      }
    },
  );

  app.get(
    "/libraries/:libraryId/videos/:videoId/processing",
    {
      schema: {
        operationId: "getVideoProcessing",
        tags: ["media: videos"],
        summary: "Processing state of a video's source, with the reason of a failure",
        security: mediaSecurity,
        params: VideoParams,
        response: { ...mediaErrorResponses, 200: Envelope(Processing) },
      },
    },
    async (request) => {
      const found = await requireVideo(media, request, request.params.libraryId, request.params.videoId);
      const row = await video.pipeline.processingOf(found);
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
};
