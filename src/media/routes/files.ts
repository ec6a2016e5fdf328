import { randomUUID } from "node:crypto";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import type { FastifySchemaCompiler } from "fastify";
import { fileTypeFromBuffer } from "file-type";
import type { BlobStore } from "../../blobs/store.ts";
import { ok, okList, okMessage } from "../../http/envelope.ts";
import { ApiError, type FieldError } from "../../http/errors.ts";
import { pageMeta, toPage } from "../../http/pagination.ts";
import {
  Envelope,
  IdParams,
  ListEnvelope,
  MessageOnly,
  mediaErrorResponses,
  PageQuery,
} from "../../http/schemas.ts";
import { acceptUploads } from "../../http/upload-bodies.ts";
import { validatorCompiler } from "../../http/validation.ts";
import { toSubtitle } from "../presenters.ts";
import { Subtitle } from "../schemas.ts";
import { canonicalLanguage, detectSubtitleFormat, type SubtitleFormat } from "../subtitle-format.ts";
import { type ReceivedForm, readHead, receiveMultipart } from "../uploads.ts";
import { videoBlobPrefix } from "../urls.ts";
import { listPath, type MediaRouteOptions, mediaSecurity, requireVideo } from "./common.ts";

const VideoParams = IdParams("libraryId", "videoId");

/**
 * Multipart bodies are read by the handler (streamed, with limits), so their schemas document the
 * request in OpenAPI only; params and query still validate as everywhere else.
 */
const documentedBodyOnly: FastifySchemaCompiler<object> = (route) =>
  route.httpPart === "body" ? () => true : validatorCompiler(route);

const BinaryFile = Type.String({ format: "binary" });
const SubtitleForm = Type.Object({
  title: Type.String({ minLength: 1, maxLength: 255 }),
  language: Type.String({ description: "BCP 47 language tag", examples: ["en", "pt-BR", "zh-Hans"] }),
  file: BinaryFile,
});
const SubtitleUpdateForm = Type.Partial(SubtitleForm, { description: "At least one of the fields." });
const ThumbnailForm = Type.Object({ file: BinaryFile });
const SubtitleParams = IdParams("libraryId", "videoId", "subtitleId");
const MAX_TITLE = 255;

const required = (field: string): FieldError => ({
  field,
  code: "validation_required",
  message: `The ${field} field is required.`,
});

/** Runs `work` with the uploaded file; if anything fails the stored file is removed. */
async function keepingFileOnSuccess<T>(form: ReceivedForm, blobs: BlobStore, work: () => Promise<T>) {
  try {
    return await work();
  } catch (error) {
    if (form.file) await blobs.delete(form.file.key);
    throw error;
  }
}

function checkTitle(value: string | undefined, errors: FieldError[]): string | undefined {
  if (value === undefined || value.trim() === "") {
    errors.push(required("title"));
    return undefined;
  }
  if (value.length > MAX_TITLE) {
    errors.push({
      field: "title",
      code: "validation_max",
      message: `The title field must be at most ${MAX_TITLE} characters.`,
    });
    return undefined;
  }
  return value;
}

function checkLanguage(value: string | undefined, errors: FieldError[]): string | undefined {
  if (value === undefined || value.trim() === "") {
    errors.push(required("language"));
    return undefined;
  }
  const canonical = canonicalLanguage(value);
  if (!canonical) {
    errors.push({
      field: "language",
      code: "validation_format",
      message: "The language field must be a well-formed BCP 47 language tag (en, pt-BR, zh-Hans).",
    });
  }
  return canonical;
}

async function checkSubtitleFile(
  blobs: BlobStore,
  key: string,
  maxBytes: number,
  errors: FieldError[],
): Promise<SubtitleFormat | undefined> {
  const content = await readHead(blobs.open(key), maxBytes + 1);
  const format = detectSubtitleFormat(content);
  if (!format) {
    errors.push({
      field: "file",
      code: "validation_mimes",
      message: "The file field must be a WebVTT or SRT subtitle file.",
    });
  }
  return format;
}

const IMAGE_TYPES: Record<string, string> = {
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".png": "image/png",
  ".gif": "image/gif",
};

const extensionOf = (filename: string): string => {
  const match = /\.[^.]+$/.exec(filename);
  return match ? match[0].toLowerCase() : "";
};

/**
 * Routes that take files (multipart/form-data). `@fastify/multipart` is registered in this context
 * only, so JSON routes elsewhere answer 415 to multipart bodies; here a non-multipart body is 415.
 */
export const fileRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (app, { media, config }) => {
  await acceptUploads(app, config);
  const { blobs } = media.deps;
  const subtitleTags = ["media: subtitles"];

  app.post(
    "/libraries/:libraryId/videos/:videoId/subtitles",
    {
      schema: {
        operationId: "createSubtitle",
        tags: subtitleTags,
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
      const { libraryId, videoId } = request.params;
      const video = await requireVideo(media, request, libraryId, videoId);
      const form = await receiveMultipart(request, blobs, {
        fileField: "file",
        maxBytes: config.limits.subtitleBytes,
        key: () => `${videoBlobPrefix(libraryId, videoId)}/subtitles/${randomUUID()}`,
      });
      const subtitle = await keepingFileOnSuccess(form, blobs, async () => {
        const errors: FieldError[] = [];
        const title = checkTitle(form.fields.title, errors);
        const language = checkLanguage(form.fields.language, errors);
        let format: SubtitleFormat | undefined;
        if (!form.file) errors.push(required("file"));
        else format = await checkSubtitleFile(blobs, form.file.key, config.limits.subtitleBytes, errors);
        if (errors.length > 0 || !title || !language || !form.file || !format)
          throw ApiError.validation(errors);
        const created = await media.subtitles.create(video, {
          title,
          language,
          file: { key: form.file.key, format },
        });
        if (!created) throw ApiError.notFound();
        return created;
      });
      return reply.code(201).send(ok("Subtitle created successfully", toSubtitle(subtitle)));
    },
  );

  app.get(
    "/libraries/:libraryId/videos/:videoId/subtitles",
    {
      schema: {
        operationId: "listSubtitles",
        tags: subtitleTags,
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
        pageMeta(listPath(request), request.query, total),
      );
    },
  );

  app.get(
    "/libraries/:libraryId/videos/:videoId/subtitles/:subtitleId",
    {
      schema: {
        operationId: "getSubtitle",
        tags: subtitleTags,
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
        tags: subtitleTags,
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
      if (!(await media.subtitles.find(video.id, subtitleId))) throw ApiError.notFound();
      const form = await receiveMultipart(request, blobs, {
        fileField: "file",
        maxBytes: config.limits.subtitleBytes,
        key: () => `${videoBlobPrefix(libraryId, videoId)}/subtitles/${randomUUID()}`,
      });
      const subtitle = await keepingFileOnSuccess(form, blobs, async () => {
        const { title: givenTitle, language: givenLanguage } = form.fields;
        if (givenTitle === undefined && givenLanguage === undefined && !form.file) {
          throw ApiError.validation([required("title"), required("language"), required("file")]);
        }
        const errors: FieldError[] = [];
        const title = givenTitle === undefined ? undefined : checkTitle(givenTitle, errors);
        const language = givenLanguage === undefined ? undefined : checkLanguage(givenLanguage, errors);
        const format = form.file
          ? await checkSubtitleFile(blobs, form.file.key, config.limits.subtitleBytes, errors)
          : undefined;
        if (errors.length > 0) throw ApiError.validation(errors);
        const updated = await media.subtitles.update(video.id, subtitleId, {
          ...(title !== undefined ? { title } : {}),
          ...(language !== undefined ? { language } : {}),
          ...(form.file && format ? { file: { key: form.file.key, format } } : {}),
        });
        if (!updated) throw ApiError.notFound();
        return updated;
      });
      return ok("Subtitle updated successfully", toSubtitle(subtitle));
    },
  );

  app.delete(
    "/libraries/:libraryId/videos/:videoId/subtitles/:subtitleId",
    {
      schema: {
        operationId: "deleteSubtitle",
        tags: subtitleTags,
        summary: "Delete a subtitle",
        security: mediaSecurity,
        params: SubtitleParams,
        response: { ...mediaErrorResponses, 200: MessageOnly },
      },
    },
    async (request) => {
      const { libraryId, videoId, subtitleId } = request.params;
      const video = await requireVideo(media, request, libraryId, videoId);
      if (!(await media.subtitles.delete(video.id, subtitleId))) throw ApiError.notFound();
      return okMessage("Subtitle deleted successfully");
    },
  );

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
        params: VideoParams,
        body: ThumbnailForm,
        response: { ...mediaErrorResponses, 200: MessageOnly },
      },
      validatorCompiler: documentedBodyOnly,
    },
    async (request) => {
      const { libraryId, videoId } = request.params;
      const video = await requireVideo(media, request, libraryId, videoId);
      const form = await receiveMultipart(request, blobs, {
        fileField: "file",
        maxBytes: config.limits.thumbnailBytes,
        key: () => `${videoBlobPrefix(libraryId, videoId)}/thumbnails/${randomUUID()}`,
      });
      await keepingFileOnSuccess(form, blobs, async () => {
        if (!form.file) throw ApiError.validation([required("file")]);
        const expected = IMAGE_TYPES[extensionOf(form.file.filename)];
        const detected = await fileTypeFromBuffer(await readHead(blobs.open(form.file.key), 4100));
        if (!expected || detected?.mime !== expected) {
          throw ApiError.field(
            "file",
            "validation_mimes",
            "The file field must be a .jpg, .jpeg, .png or .gif image whose content matches its extension.",
          );
        }
        const updated = await media.subtitles.setThumbnail(video, {
          key: form.file.key,
          contentType: expected,
          sizeBytes: form.file.sizeBytes,
        });
        if (!updated) throw ApiError.notFound();
      });
      return okMessage("Thumbnail uploaded successfully");
    },
  );
};
