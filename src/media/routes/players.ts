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
  PageQuery,
} from "../../http/schemas.ts";
import { toPlayer } from "../presenters.ts";
import { CreatePlayerBody, Player, UpdatePlayerBody } from "../schemas.ts";
import { type MediaRouteOptions, mediaSecurity, requireLibrary } from "./common.ts";

const tags = ["media: players"];
const LibraryParams = IdParams("libraryId");
const PlayerParams = IdParams("libraryId", "playerId");

export const playerRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (app, { media }) => {
  app.post(
    "/libraries/:libraryId/players",
    {
      schema: {
        operationId: "createPlayer",
        tags,
        summary: "Create a player",
        description: "Omitted theme fields take the defaults. The first player of a library is its default.",
        security: mediaSecurity,
        params: LibraryParams,
        body: CreatePlayerBody,
        response: { ...mediaErrorResponses, 201: CreatedEnvelope(Player) },
      },
    },
    async (request, reply) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const result = await media.players.create(library, request.body);
      switch (result.outcome) {
        case "created":
          return reply
            .code(201)
            .header("location", createdAt(request, result.player.id))
            .send(ok("Player created successfully", toPlayer(result.player)));
        case "not_found":
          throw ApiError.notFound();
      }
    },
  );

  app.get(
    "/libraries/:libraryId/players",
    {
      config: { storedDataOnly: true },
      schema: {
        operationId: "listPlayers",
        tags,
        summary: "List players",
        security: mediaSecurity,
        params: LibraryParams,
        querystring: PageQuery,
        response: { ...mediaErrorResponses, 200: ListEnvelope(Player) },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const { rows, total } = await media.players.list(library.id, toPage(request.query));
      return okList(
        "Players retrieved successfully",
        rows.map(toPlayer),
        pageMeta(routePath(request), request.query, total),
      );
    },
  );

  app.get(
    "/libraries/:libraryId/players/:playerId",
    {
      config: { storedDataOnly: true },
      schema: {
        operationId: "getPlayer",
        tags,
        summary: "Get a player",
        security: mediaSecurity,
        params: PlayerParams,
        response: { ...mediaErrorResponses, 200: Envelope(Player) },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const player = await media.players.find(library.id, request.params.playerId);
      if (!player) throw ApiError.notFound();
      return ok("Player retrieved successfully", toPlayer(player));
    },
  );

  app.patch(
    "/libraries/:libraryId/players/:playerId",
    {
      schema: {
        operationId: "updatePlayer",
        tags,
        summary: "Rename or restyle a player",
        description: "Given theme fields replace the stored ones; the others are kept.",
        security: mediaSecurity,
        params: PlayerParams,
        body: UpdatePlayerBody,
        response: { ...mediaErrorResponses, 200: Envelope(Player) },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const result = await media.players.update(library.id, request.params.playerId, request.body);
      switch (result.outcome) {
        case "updated":
          return ok("Player updated successfully", toPlayer(result.player));
        case "not_found":
          throw ApiError.notFound();
      }
    },
  );

  app.patch(
    "/libraries/:libraryId/players/:playerId/mark-as-default",
    {
      schema: {
        operationId: "markPlayerAsDefault",
        tags,
        summary: "Make a player the library's default",
        security: mediaSecurity,
        params: PlayerParams,
        response: { ...mediaErrorResponses, 200: MessageOnly },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const result = await media.players.markAsDefault(library, request.params.playerId);
      switch (result.outcome) {
        case "marked":
          return okMessage("Player marked as default successfully");
        case "not_found":
          throw ApiError.notFound();
      }
    },
  );

  app.delete(
    "/libraries/:libraryId/players/:playerId",
    {
      schema: {
        operationId: "deletePlayer",
        tags,
        summary: "Delete a player",
        description: "Deleting the default player leaves the library without a default.",
        security: mediaSecurity,
        params: PlayerParams,
        response: { ...mediaErrorResponses, 200: MessageOnly },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      const result = await media.players.delete(library, request.params.playerId);
      switch (result.outcome) {
        case "deleted":
          return okMessage("Player deleted successfully");
        case "not_found":
          throw ApiError.notFound();
      }
    },
  );
};
