import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
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
import type { FolderOutcome } from "../folder-service.ts";
import { toFolder } from "../presenters.ts";
import {
  BulkDeleteFoldersBody,
  CreateFolderBody,
  Folder,
  FolderIds,
  FolderListQuery,
  UpdateFolderBody,
} from "../schemas.ts";
import { type MediaRouteOptions, mediaSecurity, requireLibrary } from "./common.ts";

const tags = ["media: folders"];
const LibraryParams = IdParams("libraryId");
const FolderParams = IdParams("libraryId", "folderId");

function folderOf(result: FolderOutcome) {
  switch (result.outcome) {
    case "created":
    case "updated":
      return toFolder(result.folder);
    case "not_found":
    case "parent_not_found":
      throw ApiError.notFound();
    case "parent_is_descendant":
      throw ApiError.conflict("A folder cannot be moved into itself or one of its subfolders");
  }
}

export const folderRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (app, { media }) => {
  app.post(
    "/libraries/:libraryId/folders",
    {
      schema: {
        operationId: "createFolder",
        tags,
        summary: "Create a folder",
        description: "`parent_id` must be a folder of the same library (else 404).",
        security: mediaSecurity,
        params: LibraryParams,
        body: CreateFolderBody,
        response: { ...mediaErrorResponses, 201: CreatedEnvelope(Folder) },
      },
    },
    async (request, reply) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const folder = folderOf(await media.folders.create(library, request.body));
      return reply
        .code(201)
        .header("location", createdAt(request, folder.id))
        .send(ok("Folder created successfully", folder));
    },
  );

  app.get(
    "/libraries/:libraryId/folders",
    {
      config: { storedDataOnly: true },
      schema: {
        operationId: "listFolders",
        tags,
        summary: "List folders",
        security: mediaSecurity,
        params: LibraryParams,
        querystring: FolderListQuery,
        response: { ...mediaErrorResponses, 200: ListEnvelope(Folder) },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const { query } = request;
      const { rows, total } = await media.folders.list(library.id, query.parent_id, toPage(query));
      return okList(
        "Folders retrieved successfully",
        rows.map(toFolder),
        pageMeta(routePath(request), query, total, { parent_id: query.parent_id }),
      );
    },
  );

  app.get(
    "/libraries/:libraryId/folders/:folderId",
    {
      config: { storedDataOnly: true },
      schema: {
        operationId: "getFolder",
        tags,
        summary: "Get a folder",
        security: mediaSecurity,
        params: FolderParams,
        response: { ...mediaErrorResponses, 200: Envelope(Folder) },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const folder = await media.folders.find(library.id, request.params.folderId);
      if (!folder) throw ApiError.notFound();
      return ok("Folder retrieved successfully", toFolder(folder));
    },
  );

  app.patch(
    "/libraries/:libraryId/folders/:folderId",
    {
      schema: {
        operationId: "updateFolder",
        tags,
        summary: "Rename or move a folder",
        description: "`parent_id: null` moves it to the top level; moving it below itself is 409.",
        security: mediaSecurity,
        params: FolderParams,
        body: UpdateFolderBody,
        response: { ...mediaErrorResponses, 200: Envelope(Folder) },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const folder = folderOf(await media.folders.update(library.id, request.params.folderId, request.body));
      return ok("Folder updated successfully", folder);
    },
  );

  app.delete(
    "/libraries/:libraryId/folders/:folderId",
    {
      schema: {
        operationId: "deleteFolder",
        tags,
        summary: "Delete a folder with its subfolders and videos",
        security: mediaSecurity,
        params: FolderParams,
        response: { ...mediaErrorResponses, 200: MessageOnly },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const result = await media.folders.deleteMany(library.id, [request.params.folderId]);
      if (result.outcome === "not_found") throw ApiError.notFound();
      return okMessage("Folder deleted successfully");
    },
  );

  app.post(
    "/libraries/:libraryId/folders/bulk",
    {
      schema: {
        operationId: "bulkDeleteFolders",
        tags,
        summary: "Delete folders with all nested subfolders and videos",
        description: "One transaction: if any id is not a folder of this library, nothing is deleted (404).",
        security: mediaSecurity,
        params: LibraryParams,
        body: BulkDeleteFoldersBody,
        response: { ...mediaErrorResponses, 200: Envelope(FolderIds) },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const result = await media.folders.deleteMany(library.id, request.body.folder_ids);
      if (result.outcome === "not_found") throw ApiError.notFound();
      return ok("Folders deleted successfully", { folder_ids: result.folderIds });
    },
  );
};
