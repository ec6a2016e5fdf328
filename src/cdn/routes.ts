import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { requireApiKey } from "../http/auth.ts";
import { ok, okList } from "../http/envelope.ts";
import { ApiError } from "../http/errors.ts";
import { pageMeta, toPage } from "../http/pagination.ts";
import { Envelope, IdParams, ListEnvelope, mediaErrorResponses, PageQuery } from "../http/schemas.ts";
import type { IdentityService } from "../identity/service.ts";
import type { AnalyticsService } from "./analytics.ts";
import {
  Analytics,
  AnalyticsQuery,
  CreateDistributionBody,
  Distribution,
  EmptyObject,
  Purge,
  PurgeBody,
  UpdateDistributionBody,
} from "./schemas.ts";
import type { CdnService, DistributionOutcome } from "./service.ts";

const security: { [name: string]: string[] }[] = [{ apiKeyHeader: [] }, { bearer: [] }];
const tags = ["cdn"];
const DistributionParams = IdParams("id");

function unwrap(outcome: DistributionOutcome) {
  if (outcome.ok) return outcome.distribution;
  switch (outcome.reason) {
    case "not_found":
      throw ApiError.notFound();
    case "hostname_taken":
      throw ApiError.conflict("A distribution with this hostname already exists");
    case "library_distribution":
      throw ApiError.conflict(
        "This distribution belongs to a media library: its origin is fixed and it is deleted with the library",
      );
    case "invalid":
      throw ApiError.validation(outcome.errors);
  }
}

export const cdnRoutes: FastifyPluginAsyncTypebox<{
  identity: IdentityService;
  cdn: CdnService;
  analytics: AnalyticsService;
  maxPurgePaths: number;
}> = async (app, { identity, cdn, analytics, maxPurgePaths }) => {
  requireApiKey(app, "cdn", identity);

  app.post(
    "/distributions",
    {
      schema: {
        operationId: "createCdnDistribution",
        tags,
        summary: "Create a distribution",
        security,
        body: CreateDistributionBody,
        response: { ...mediaErrorResponses, 201: Envelope(Distribution) },
      },
    },
    async (request, reply) => {
      const distribution = unwrap(await cdn.create(request.auth.organizationId, request.body));
      return reply.code(201).send(ok("Distribution created successfully", distribution));
    },
  );

  app.get(
    "/distributions",
    {
      schema: {
        operationId: "listCdnDistributions",
        tags,
        summary: "List distributions, newest first",
        security,
        querystring: PageQuery,
        response: { ...mediaErrorResponses, 200: ListEnvelope(Distribution) },
      },
    },
    async (request) => {
      const { rows, total } = await cdn.list(request.auth.organizationId, toPage(request.query));
      return okList(
        "Distributions retrieved successfully",
        rows,
        pageMeta("/v1/cdn/distributions", request.query, total),
      );
    },
  );

  app.get(
    "/distributions/:id",
    {
      schema: {
        operationId: "getCdnDistribution",
        tags,
        summary: "Get a distribution",
        security,
        params: DistributionParams,
        response: { ...mediaErrorResponses, 200: Envelope(Distribution) },
      },
    },
    async (request) => {
      const distribution = await cdn.get(request.auth.organizationId, request.params.id);
      if (!distribution) throw ApiError.notFound();
      return ok("Distribution retrieved successfully", distribution);
    },
  );

  app.patch(
    "/distributions/:id",
    {
      schema: {
        operationId: "updateCdnDistribution",
        tags,
        summary: "Update a distribution's origin, default TTL or status",
        security,
        params: DistributionParams,
        body: UpdateDistributionBody,
        response: { ...mediaErrorResponses, 200: Envelope(Distribution) },
      },
    },
    async (request) => {
      const distribution = unwrap(
        await cdn.update(request.auth.organizationId, request.params.id, request.body),
      );
      return ok("Distribution updated successfully", distribution);
    },
  );

  app.delete(
    "/distributions/:id",
    {
      schema: {
        operationId: "deleteCdnDistribution",
        tags,
        summary: "Delete a distribution",
        security,
        params: DistributionParams,
        response: { ...mediaErrorResponses, 200: Envelope(Distribution) },
      },
    },
    async (request) => {
      const distribution = unwrap(await cdn.delete(request.auth.organizationId, request.params.id));
      return ok("Distribution deleted successfully", distribution);
    },
  );

  app.post(
    "/distributions/:id/purges",
    {
      schema: {
        operationId: "purgeCdnDistribution",
        tags,
        summary: "Purge cached paths (a trailing * purges a prefix; /* purges everything)",
        security,
        params: DistributionParams,
        body: PurgeBody(maxPurgePaths),
        response: { ...mediaErrorResponses, 200: EmptyObject },
      },
    },
    async (request) => {
      if (!(await cdn.purge(request.auth.organizationId, request.params.id, request.body.paths))) {
        throw ApiError.notFound();
      }
      return {};
    },
  );

  app.get(
    "/distributions/:id/purges",
    {
      schema: {
        operationId: "listCdnPurges",
        tags,
        summary: "Purge history of a distribution, newest first",
        security,
        params: DistributionParams,
        querystring: PageQuery,
        response: { ...mediaErrorResponses, 200: ListEnvelope(Purge) },
      },
    },
    async (request) => {
      const page = await cdn.listPurges(
        request.auth.organizationId,
        request.params.id,
        toPage(request.query),
      );
      if (!page) throw ApiError.notFound();
      return okList(
        "Purges retrieved successfully",
        page.rows,
        pageMeta(`/v1/cdn/distributions/${request.params.id}/purges`, request.query, page.total),
      );
    },
  );

  app.get(
    "/analytics",
    {
      schema: {
        operationId: "getCdnAnalytics",
        tags,
        summary: "Edge traffic per time bucket",
        security,
        querystring: AnalyticsQuery,
        response: { ...mediaErrorResponses, 200: Analytics },
      },
    },
    async (request) => {
      const outcome = await analytics.query(request.auth.organizationId, request.query);
      if (outcome.ok) return outcome.analytics;
      if (outcome.reason === "not_found") throw ApiError.notFound();
      throw ApiError.validation(outcome.errors);
    },
  );
};
