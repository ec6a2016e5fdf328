import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { requireApiKey } from "../http/auth.ts";
import { createdAt, ok, okList, okMessage } from "../http/envelope.ts";
import { ApiError } from "../http/errors.ts";
import { pageMeta, toPage } from "../http/pagination.ts";
import { headersShownTo, secretShownTo, textShownTo, urlShownTo } from "../http/read-only-view.ts";
import {
  CreatedEnvelope,
  Envelope,
  IdParams,
  ListEnvelope,
  MessageOnly,
  mediaErrorResponses,
  PageQuery,
} from "../http/schemas.ts";
import { bodyField } from "../http/validation.ts";
import type { AuthContext, IdentityService } from "../identity/service.ts";
import {
  CreateEndpointBody,
  DeliveryQuery,
  QueuedDelivery,
  RotateSecretBody,
  UpdateEndpointBody,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookEndpointWithSecret,
} from "./schemas.ts";
import type { EndpointOutcome, QueuedOutcome, WebhookService } from "./service.ts";

const security: Record<string, string[]>[] = [{ bearer: [] }, { apiKeyHeader: [] }];
const tags = ["webhooks"];

function endpointOf(result: EndpointOutcome) {
  switch (result.outcome) {
    case "created":
    case "found":
    case "updated":
    case "rotated":
      return result.endpoint;
    case "not_found":
      throw ApiError.notFound();
    case "invalid":
      throw ApiError.validation(result.errors);
    case "limit_reached":
      throw ApiError.conflict(
        `This library already has ${result.limit} webhook endpoints, the most it may have; delete one to add another`,
      );
  }
}

/**
 * Read-only keys never see signing secrets, nor the values of custom headers or the credentials in
 * the URL (`?token=`, a Slack or Discord webhook's token in its path), which often are the
 * receiver's own credential (docs/security.md); header and parameter names stay visible.
 */
const shownTo = (auth: AuthContext, endpoint: WebhookEndpoint): WebhookEndpoint => ({
  ...endpoint,
  url: urlShownTo(auth, endpoint.url),
  secret: secretShownTo(auth, endpoint.secret),
  headers: headersShownTo(auth, endpoint.headers),
});

/**
 * A delivery as a reader is shown it: its endpoint as `shownTo` shows it, and the receiver's answer
 * and the attempt's error as `shownText` shows them (`textShownTo` of the endpoint's secret values,
 * `WebhookService.listDeliveries`), since a receiver that echoes the request repeats its headers and URL.
 */
const deliveryShownTo = (
  auth: AuthContext,
  delivery: WebhookDelivery,
  shownText: (text: string) => string,
): WebhookDelivery => ({
  ...delivery,
  webhook_endpoint: shownTo(auth, delivery.webhook_endpoint),
  response_body: shownText(delivery.response_body),
  ...(delivery.error === undefined ? {} : { error: shownText(delivery.error) }),
});

function queuedOf(result: QueuedOutcome) {
  switch (result.outcome) {
    case "queued":
      return result.delivery;
    case "not_found":
      throw ApiError.notFound();
  }
}

/** A listing's outcome, or 404 when its library or endpoint is not the caller's. */
function listOf<Listed extends { outcome: "listed" }>(result: Listed | { outcome: "not_found" }): Listed {
  if (result.outcome === "not_found") throw ApiError.notFound();
  return result;
}

/** `/v1/media/libraries/{libraryId}/webhooks`: endpoints, their deliveries, test sends and retries. */
export const webhookRoutes: FastifyPluginAsyncTypebox<{
  identity: IdentityService;
  webhooks: WebhookService;
}> = async (app, { identity, webhooks }) => {
  requireApiKey(app, "media", identity);
  const base = (libraryId: string) => `/v1/media/libraries/${libraryId}/webhooks`;

  // The URL's address is checked also when the schema refuses the body, so its error comes with the others.
  const fieldChecks = (body: unknown) => webhooks.checkUrl(bodyField(body, "url"));

  app.post(
    "/",
    {
      config: { fieldChecks },
      schema: {
        operationId: "createWebhookEndpoint",
        tags,
        summary: "Create a webhook endpoint",
        security,
        params: IdParams("libraryId"),
        body: CreateEndpointBody,
        response: { ...mediaErrorResponses, 201: CreatedEnvelope(WebhookEndpointWithSecret) },
      },
    },
    async (request, reply) => {
      const endpoint = endpointOf(
        await webhooks.create(request.auth, request.params.libraryId, request.body),
      );
      return reply
        .code(201)
        .header("location", createdAt(request, endpoint.id))
        .send(ok("Webhook endpoint created", endpoint));
    },
  );

  app.get(
    "/",
    {
      config: { storedDataOnly: true },
      schema: {
        operationId: "listWebhookEndpoints",
        tags,
        summary: "List a library's webhook endpoints",
        security,
        params: IdParams("libraryId"),
        querystring: PageQuery,
        response: { ...mediaErrorResponses, 200: ListEnvelope(WebhookEndpoint) },
      },
    },
    async (request) => {
      const { libraryId } = request.params;
      const { rows, total } = listOf(
        await webhooks.list(request.auth.organizationId, libraryId, toPage(request.query)),
      );
      const endpoints = rows.map((endpoint) => shownTo(request.auth, endpoint));
      return okList("Webhook endpoints", endpoints, pageMeta(base(libraryId), request.query, total));
    },
  );

  app.get(
    "/:endpointId",
    {
      config: { storedDataOnly: true },
      schema: {
        operationId: "getWebhookEndpoint",
        tags,
        summary: "Get a webhook endpoint",
        security,
        params: IdParams("libraryId", "endpointId"),
        response: { ...mediaErrorResponses, 200: Envelope(WebhookEndpoint) },
      },
    },
    async (request) => {
      const { libraryId, endpointId } = request.params;
      const endpoint = endpointOf(await webhooks.get(request.auth.organizationId, libraryId, endpointId));
      return ok("Webhook endpoint", shownTo(request.auth, endpoint));
    },
  );

  app.patch(
    "/:endpointId",
    {
      config: { fieldChecks },
      schema: {
        operationId: "updateWebhookEndpoint",
        tags,
        summary: "Update a webhook endpoint",
        security,
        params: IdParams("libraryId", "endpointId"),
        body: UpdateEndpointBody,
        response: { ...mediaErrorResponses, 200: Envelope(WebhookEndpointWithSecret) },
      },
    },
    async (request) => {
      const { libraryId, endpointId } = request.params;
      const endpoint = endpointOf(await webhooks.update(request.auth, libraryId, endpointId, request.body));
      return ok("Webhook endpoint updated", endpoint);
    },
  );

  app.delete(
    "/:endpointId",
    {
      schema: {
        operationId: "deleteWebhookEndpoint",
        tags,
        summary: "Delete a webhook endpoint and its delivery history",
        security,
        params: IdParams("libraryId", "endpointId"),
        response: { ...mediaErrorResponses, 200: MessageOnly },
      },
    },
    async (request) => {
      const { libraryId, endpointId } = request.params;
      const result = await webhooks.delete(request.auth.organizationId, libraryId, endpointId);
      switch (result.outcome) {
        case "deleted":
          return okMessage("Webhook endpoint deleted");
        case "not_found":
          throw ApiError.notFound();
      }
    },
  );

  app.post(
    "/:endpointId/rotate-secret",
    {
      schema: {
        operationId: "rotateWebhookSecret",
        tags,
        summary: "Replace the endpoint's signing secret",
        description:
          "Without a body the old secret stops signing at once; `previous_secret_expires_in_s` keeps it signing deliveries, after the new one, for that long (docs/webhooks.md).",
        security,
        params: IdParams("libraryId", "endpointId"),
        bodyOptional: true,
        body: RotateSecretBody,
        response: { ...mediaErrorResponses, 200: Envelope(WebhookEndpointWithSecret) },
      },
    },
    async (request) => {
      const { libraryId, endpointId } = request.params;
      const { previous_secret_expires_in_s = 0 } = request.body;
      const endpoint = endpointOf(
        await webhooks.rotateSecret(request.auth, libraryId, endpointId, previous_secret_expires_in_s),
      );
      return ok("Webhook secret rotated", endpoint);
    },
  );

  app.post(
    "/:endpointId/test",
    {
      schema: {
        operationId: "testWebhookEndpoint",
        tags,
        summary: "Send a test notification to this endpoint",
        security,
        params: IdParams("libraryId", "endpointId"),
        response: { ...mediaErrorResponses, 202: Envelope(QueuedDelivery) },
      },
    },
    async (request, reply) => {
      const { libraryId, endpointId } = request.params;
      const queued = queuedOf(await webhooks.sendTest(request.auth.organizationId, libraryId, endpointId));
      return reply.code(202).send(ok("Test notification queued", queued));
    },
  );

  app.get(
    "/:endpointId/events",
    {
      schema: {
        operationId: "listWebhookDeliveries",
        tags,
        summary: "List the delivery attempts made to an endpoint",
        description: "One record per attempt made, newest first; attempts not yet made are not listed.",
        security,
        params: IdParams("libraryId", "endpointId"),
        querystring: DeliveryQuery,
        response: { ...mediaErrorResponses, 200: ListEnvelope(WebhookDelivery) },
      },
    },
    async (request) => {
      const { libraryId, endpointId } = request.params;
      const { limit, page, event, success } = request.query;
      const { rows, total, secretValues } = listOf(
        await webhooks.listDeliveries(
          request.auth.organizationId,
          libraryId,
          endpointId,
          { event, success },
          toPage({ limit, page }),
        ),
      );
      const shownText = textShownTo(request.auth, secretValues);
      return okList(
        "Webhook deliveries",
        rows.map((delivery) => deliveryShownTo(request.auth, delivery, shownText)),
        pageMeta(`${base(libraryId)}/${endpointId}/events`, { limit, page }, total, { event, success }),
      );
    },
  );

  app.post(
    "/:endpointId/events/:deliveryId/retry",
    {
      schema: {
        operationId: "retryWebhookDelivery",
        tags,
        summary: "Send a delivery's notification again now, as a new attempt",
        security,
        params: IdParams("libraryId", "endpointId", "deliveryId"),
        response: { ...mediaErrorResponses, 202: Envelope(QueuedDelivery) },
      },
    },
    async (request, reply) => {
      const { libraryId, endpointId, deliveryId } = request.params;
      const queued = queuedOf(
        await webhooks.retryDelivery(request.auth.organizationId, libraryId, endpointId, deliveryId),
      );
      return reply.code(202).send(ok("Delivery retry queued", queued));
    },
  );
};
