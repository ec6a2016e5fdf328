import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { LATEST_INSTANT } from "../../clock.ts";
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
  TIME_OR_DAY_WORDS,
} from "../../http/schemas.ts";
import { toLibrary } from "../presenters.ts";
import {
  CreateLibraryBody,
  type CreateLibraryInput,
  Library,
  LibraryListQuery,
  UpdateLibraryBody,
} from "../schemas.ts";
import { type MediaRouteOptions, mediaSecurity, requireLibrary } from "./common.ts";

const LibraryParams = IdParams("libraryId");
const tags = ["media: libraries"];

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const EARLIEST = Date.parse("0001-01-01T00:00:00.000Z");

/** A filter bound as stored text; a whole day counts from its first to its last millisecond. */
function timeBound(field: string, value: string | undefined, end: boolean): string | undefined {
  if (value === undefined) return undefined;
  const text = DAY.test(value) ? `${value}T${end ? "23:59:59.999" : "00:00:00.000"}Z` : value;
  const time = Date.parse(text);
  if (Number.isNaN(time))
    throw ApiError.field(
      field,
      "validation_format",
      `The ${field} field has an invalid format. It must be ${TIME_OR_DAY_WORDS}.`,
    );
  // Times are kept to the millisecond and Date.parse drops finer digits: a start bound between two
  // milliseconds begins at the next one, or a resource made before it would match.
  const finer = /\.\d{3}(\d+)/.exec(text)?.[1] ?? "";
  const start = !end && /[1-9]/.test(finer) ? time + 1 : time;
  // Year 0 is valid ISO 8601 but out of PostgreSQL's range; nothing was created before year 1. Past
  // year 9999 the ISO form gains a sign ("+010000-...") that neither store compares as a time.
  return new Date(Math.min(Math.max(start, EARLIEST), LATEST_INSTANT)).toISOString();
}

export const libraryRoutes: FastifyPluginAsyncTypebox<MediaRouteOptions> = async (app, { media, config }) => {
  app.post(
    "/libraries",
    {
      schema: {
        operationId: "createLibrary",
        tags,
        summary: "Create a library",
        description:
          "Starts `provisioning` with its own CDN distribution and becomes `active` within seconds.",
        security: mediaSecurity,
        body: CreateLibraryBody(config.regions),
        response: { ...mediaErrorResponses, 201: CreatedEnvelope(Library) },
      },
    },
    async (request, reply) => {
      const { organizationId, userUuid } = request.auth;
      const { library } = await media.libraries.create(
        organizationId,
        userUuid,
        request.body as CreateLibraryInput,
      );
      return reply
        .code(201)
        .header("location", createdAt(request, library.id))
        .send(ok("Library created successfully", toLibrary(library)));
    },
  );

  app.get(
    "/libraries",
    {
      schema: {
        operationId: "listLibraries",
        tags,
        summary: "List libraries",
        security: mediaSecurity,
        querystring: LibraryListQuery,
        response: { ...mediaErrorResponses, 200: ListEnvelope(Library) },
      },
      config: { storedDataOnly: true },
    },
    async (request) => {
      const query = request.query;
      const errors = [];
      let createdFrom: string | undefined;
      let createdTo: string | undefined;
      try {
        createdFrom = timeBound("created_after", query.created_after, false);
      } catch (error) {
        errors.push(...((error as ApiError).options.fieldErrors ?? []));
      }
      try {
        createdTo = timeBound("created_before", query.created_before, true);
      } catch (error) {
        errors.push(...((error as ApiError).options.fieldErrors ?? []));
      }
      if (errors.length > 0) throw ApiError.validation(errors);
      const { rows, total } = await media.libraries.list(
        request.auth.organizationId,
        {
          ...(query.default_privacy ? { defaultPrivacy: query.default_privacy } : {}),
          ...(createdFrom ? { createdFrom } : {}),
          ...(createdTo ? { createdTo } : {}),
          ...(query.search ? { search: query.search } : {}),
        },
        toPage(query),
      );
      return okList(
        "Libraries retrieved successfully",
        rows.map(toLibrary),
        pageMeta(routePath(request), query, total, {
          default_privacy: query.default_privacy,
          created_after: query.created_after,
          created_before: query.created_before,
          search: query.search,
        }),
      );
    },
  );

  app.get(
    "/libraries/:libraryId",
    {
      config: { storedDataOnly: true },
      schema: {
        operationId: "getLibrary",
        tags,
        summary: "Get a library",
        security: mediaSecurity,
        params: LibraryParams,
        response: { ...mediaErrorResponses, 200: Envelope(Library) },
      },
    },
    async (request) => {
      const library = await requireLibrary(media, request, request.params.libraryId);
      return ok("Library retrieved successfully", toLibrary(library));
    },
  );

  app.patch(
    "/libraries/:libraryId",
    {
      schema: {
        operationId: "updateLibrary",
        tags,
        summary: "Update a library's name, description or default privacy",
        security: mediaSecurity,
        params: LibraryParams,
        body: UpdateLibraryBody,
        response: { ...mediaErrorResponses, 200: Envelope(Library) },
      },
    },
    async (request) => {
      const { organizationId, userUuid } = request.auth;
      const result = await media.libraries.update(
        organizationId,
        userUuid,
        request.params.libraryId,
        request.body,
      );
      switch (result.outcome) {
        case "updated":
          return ok("Library updated successfully", toLibrary(result.library));
        case "not_found":
          throw ApiError.notFound();
      }
    },
  );

  app.delete(
    "/libraries/:libraryId",
    {
      schema: {
        operationId: "deleteLibrary",
        tags,
        summary: "Delete a library and everything in it",
        security: mediaSecurity,
        params: LibraryParams,
        response: { ...mediaErrorResponses, 200: MessageOnly },
      },
    },
    async (request) => {
      const result = await media.libraries.delete(request.auth.organizationId, request.params.libraryId);
      switch (result.outcome) {
        case "deleted":
          return okMessage("Library deleted successfully");
        case "not_found":
          throw ApiError.notFound();
      }
    },
  );
};
