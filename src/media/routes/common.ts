import type { FastifyRequest } from "fastify";
import type { Config } from "../../config.ts";
import { ApiError } from "../../http/errors.ts";
import type { IdentityService } from "../../identity/service.ts";
import type { VideoServices } from "../../video/index.ts";
import type { MediaServices } from "../index.ts";
import type { LibraryRow, VideoRow } from "../tables.ts";

export interface MediaRouteOptions {
  media: MediaServices;
  video: VideoServices;
  identity: IdentityService;
  config: Config;
}

/** Bearer or X-API-Key, as the OpenAPI document states for every media route. */
export const mediaSecurity: Record<string, string[]>[] = [{ bearer: [] }, { apiKeyHeader: [] }];

/** The library of the caller's organization, else 404 (another tenant's library does not exist). */
export async function requireLibrary(
  media: MediaServices,
  request: FastifyRequest,
  libraryId: string,
): Promise<LibraryRow> {
  const library = await media.libraries.find(request.auth.organizationId, libraryId);
  if (!library) throw ApiError.notFound();
  return library;
}

export async function requireVideo(
  media: MediaServices,
  request: FastifyRequest,
  libraryId: string,
  videoId: string,
): Promise<VideoRow> {
  const library = await requireLibrary(media, request, libraryId);
  const video = await media.videos.find(library.id, videoId);
  if (!video) throw ApiError.notFound();
  return video;
}
