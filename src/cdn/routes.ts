import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { requireApiKey } from "../http/auth.ts";
import { createdAt, ok, okList } from "../http/envelope.ts";
import { ApiError, type FieldError } from "../http/errors.ts";
import { pageMeta, toPage } from "../http/pagination.ts";
import { urlShownTo } from "../http/read-only-view.ts";
import {
  CreatedEnvelope,
  Envelope,
  IdParams,
  ListEnvelope,
  MediaError,
  mediaErrorResponses,
  PageQuery,
} from "../http/schemas.ts";
import { bodyField } from "../http/validation.ts";
import type { AuthContext, IdentityService } from "../identity/service.ts";
import type { AnalyticsOutcome, AnalyticsService } from "./analytics.ts";
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
import type {
  CdnService,
  CreateOutcome,
  DeleteOutcome,
  GetOutcome,
  PurgeListOutcome,
  PurgeOutcome,
  UpdateOutcome,
  VerifyOutcome,
} from "./service.ts";

const security: { [name: string]: string[] }[] = [{ apiKeyHeader: [] }, { bearer: [] }];
const tags = ["cdn"];
// Named as SPEC.md names it, so the OpenAPI document and the typed client use that name.
const DistributionParams = IdParams("distributionID");

const HOSTNAME_TAKEN = "A distribution with this hostname already exists";
const LIBRARY_DISTRIBUTION =
  "This distribution belongs to a media library: its origin is fixed and it is deleted with the library";

function created(result: CreateOutcome): Distribution {
  switch (result.outcome) {
    case "created":
      return result.distribution;
    case "invalid":
      throw ApiError.validation(result.errors);
    case "hostname_taken":
      throw ApiError.conflict(HOSTNAME_TAKEN);
    case "hostname_claimable":
      throw ApiError.conflict(
        `${HOSTNAME_TAKEN}, but its organization has not verified the name. To take the name over, publish a TXT record ${result.recordName} with the value ${result.recordValue} and create the distribution again (or create it again after ${result.claimExpiresAt}, when the claim expires); so far ${result.reason}`,
      );
    case "lookup_failed":
      throw dnsLookupFailed(
        `${HOSTNAME_TAKEN}, but its organization has not verified the name. To take the name over, publish a TXT record ${result.recordName} with the value ${result.recordValue} and create the distribution again; the DNS lookup of that record failed (${result.code}), try again later`,
      );
  }
}

/** DNS could not be asked: an upstream failure (CONTRACT 4), not an answer that the record is missing. */
const dnsLookupFailed = (message: string): ApiError => new ApiError(502, message);

/**
 * A read-only key never sees a credential written into `origin_url` (user info, a `?token=`, a
 * secret-looking path segment), which its writer may use elsewhere (docs/security.md).
 */
const shownTo = (auth: AuthContext, distribution: Distribution): Distribution => ({
  ...distribution,
  origin_url: urlShownTo(auth, distribution.origin_url),
});

function found(result: GetOutcome): Distribution {
  switch (result.outcome) {
    case "found":
      return result.distribution;
    case "not_found":
      throw ApiError.notFound();
  }
}

function updated(result: UpdateOutcome): Distribution {
  switch (result.outcome) {
    case "updated":
      return result.distribution;
    case "invalid":
      throw ApiError.validation(result.errors);
    case "library_distribution":
      throw ApiError.conflict(LIBRARY_DISTRIBUTION);
    case "not_found":
      throw ApiError.notFound();
  }
}

function deleted(result: DeleteOutcome): Distribution {
  switch (result.outcome) {
    case "deleted":
      return result.distribution;
    case "library_distribution":
      throw ApiError.conflict(LIBRARY_DISTRIBUTION);
    case "not_found":
      throw ApiError.notFound();
  }
}

const NOTHING_TO_VERIFY =
  "This distribution's host name needs no verification: it is a media library's own name on this platform";

function verified(result: VerifyOutcome): Distribution {
  switch (result.outcome) {
    case "verified":
      return result.distribution;
    case "record_missing":
      throw ApiError.conflict(
        `Host name not verified: expected a TXT record ${result.recordName} with the value ${result.recordValue}, but ${result.reason}`,
      );
    case "lookup_failed":
      throw dnsLookupFailed(
        `Host name not verified: the DNS lookup of the TXT record ${result.recordName} failed (${result.code}); try again later`,
      );
    case "nothing_to_verify":
      throw ApiError.conflict(NOTHING_TO_VERIFY);
    case "not_found":
      throw ApiError.notFound();
  }
}

function purged(result: PurgeOutcome): Record<string, never> {
  switch (result.outcome) {
    case "purged":
      return {};
    case "not_found":
      throw ApiError.notFound();
  }
}

function purgePage(result: PurgeListOutcome): { rows: Purge[]; total: number } {
  switch (result.outcome) {
    case "listed":
      return result;
    case "not_found":
      throw ApiError.notFound();
  }
}

/** The analytics query's own checks of the parameters sent as text; the schema answers for the rest. */
function analyticsChecks(analytics: AnalyticsService, query: unknown): FieldError[] {
  const sent = query as Record<string, unknown>;
  const text = (name: string) => (typeof sent[name] === "string" ? (sent[name] as string) : undefined);
  const metrics = [sent.metrics].flat().filter((value): value is string => typeof value === "string");
  const checked = analytics.check({
    from: text("from"),
    to: text("to"),
    granularity: text("granularity"),
    metrics,
  });
  return checked.outcome === "invalid" ? checked.errors : [];
}

function analyticsOf(result: AnalyticsOutcome): Analytics {
  switch (result.outcome) {
    case "ok":
      return result.analytics;
    case "invalid":
      throw ApiError.validation(result.errors);
    case "not_found":
      throw ApiError.notFound();
  }
}

export const cdnRoutes: FastifyPluginAsyncTypebox<{
  identity: IdentityService;
  cdn: CdnService;
  analytics: AnalyticsService;
  maxPurgePaths: number;
}> = async (app, { identity, cdn, analytics, maxPurgePaths }) => {
  requireApiKey(app, "cdn", identity);

  // Checked also when the schema refuses the body, so these fields' errors come with the others.
  app.post(
    "/distributions",
    {
      config: {
        fieldChecks: (body) =>
          cdn.checkFields({
            hostname: bodyField(body, "hostname"),
            origin_url: bodyField(body, "origin_url"),
          }),
      },
      schema: {
        operationId: "createCdnDistribution",
        tags,
        summary: "Create a distribution",
        security,
        body: CreateDistributionBody,
        response: { ...mediaErrorResponses, 201: CreatedEnvelope(Distribution), 502: MediaError },
      },
    },
    async (request, reply) => {
      const distribution = created(await cdn.create(request.auth.organizationId, request.body));
      return reply
        .code(201)
        .header("location", createdAt(request, distribution.id))
        .send(ok("Distribution created successfully", distribution));
    },
  );

  app.get(
    "/distributions",
    {
      config: { storedDataOnly: true },
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
        rows.map((distribution) => shownTo(request.auth, distribution)),
        pageMeta("/v1/cdn/distributions", request.query, total),
      );
    },
  );

  app.get(
    "/distributions/:distributionID",
    {
      config: { storedDataOnly: true },
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
      const distribution = found(await cdn.get(request.auth.organizationId, request.params.distributionID));
      return ok("Distribution retrieved successfully", shownTo(request.auth, distribution));
    },
  );

  app.patch(
    "/distributions/:distributionID",
    {
      config: { fieldChecks: (body) => cdn.checkFields({ origin_url: bodyField(body, "origin_url") }) },
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
      const distribution = updated(
        await cdn.update(request.auth.organizationId, request.params.distributionID, request.body),
      );
      return ok("Distribution updated successfully", distribution);
    },
  );

  app.delete(
    "/distributions/:distributionID",
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
      const distribution = deleted(
        await cdn.delete(request.auth.organizationId, request.params.distributionID),
      );
      return ok("Distribution deleted successfully", distribution);
    },
  );

  app.post(
    "/distributions/:distributionID/hostname-verification",
    {
      schema: {
        operationId: "verifyCdnDistributionHostname",
        tags,
        summary: "Verify the distribution's host name by its DNS TXT record",
        description:
          "Looks up the TXT record named in `hostname_verification` and, when one of its values is the distribution's token, marks the host name verified: every edge then serves the distribution under its host name within a second. A record that is missing or holds other values is 409, with a message naming the record expected; a lookup DNS did not answer (timeout, SERVFAIL) is 502. Until verified, a distribution is served path-style only. Meaningful when the platform verifies host names (CUMULO_CDN_HOSTNAME_VERIFICATION=dns); otherwise a distribution is verified when created.",
        security,
        params: DistributionParams,
        response: { ...mediaErrorResponses, 200: Envelope(Distribution), 502: MediaError },
      },
    },
    async (request) => {
      const distribution = verified(
        await cdn.verifyHostname(request.auth.organizationId, request.params.distributionID),
      );
      return ok("Host name verified", distribution);
    },
  );

  app.post(
    "/distributions/:distributionID/purges",
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
      return purged(
        await cdn.purge(request.auth.organizationId, request.params.distributionID, request.body.paths),
      );
    },
  );

  app.get(
    "/distributions/:distributionID/purges",
    {
      config: { storedDataOnly: true },
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
      const page = purgePage(
        await cdn.listPurges(
          request.auth.organizationId,
          request.params.distributionID,
          toPage(request.query),
        ),
      );
      return okList(
        "Purges retrieved successfully",
        page.rows,
        pageMeta(`/v1/cdn/distributions/${request.params.distributionID}/purges`, request.query, page.total),
      );
    },
  );

  app.get(
    "/analytics",
    {
      // A parameter of the wrong type (a repeated `granularity`) is the schema's; the others are
      // still checked, so every failing one is reported together.
      config: { queryChecks: (query) => analyticsChecks(analytics, query) },
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
      return analyticsOf(await analytics.query(request.auth.organizationId, request.query));
    },
  );
};
