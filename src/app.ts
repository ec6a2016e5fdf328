import cookie from "@fastify/cookie";
import swagger from "@fastify/swagger";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import scalar from "@scalar/fastify-api-reference";
import Fastify, { type FastifyInstance } from "fastify";
import { cdnRoutes } from "./cdn/routes.ts";
import { CLOUD_PREFIXES, cloudRoutes } from "./cloud/routes/index.ts";
import { s3EndpointRoutes } from "./cloud/routes/s3-endpoint.ts";
import { consolePages } from "./console/pages.ts";
import { isDeveloperModeCall } from "./devmode/prefix.ts";
import { devModeRoutes } from "./devmode/routes.ts";
import { registerAuthDecorators } from "./http/auth.ts";
import { CompressedOnce } from "./http/compressed-once.ts";
import { clientErrorBody, frameworkErrors, registerErrorHandling } from "./http/error-handler.ts";
import { ApiError } from "./http/errors.ts";
import { FailedAuthThrottle } from "./http/failed-auth-throttle.ts";
import { parseFormText } from "./http/form-text.ts";
import { type IdentifierSchema, lowerCaseIdFields, lowerCaseUuids } from "./http/identifiers.ts";
import { acceptJsonBodies, sendsBody } from "./http/json-bodies.ts";
import {
  clientErrorHandler,
  continueWhenRead,
  createHttpServer,
  drainConnections,
  expectationFailedHandler,
  lingerAfterEarlyAnswer,
  stopListening,
} from "./http/listener.ts";
import { documentedSchema, publishedDocument } from "./http/openapi.ts";
import { registerRateLimit } from "./http/rate-limit.ts";
import { requestId } from "./http/request-id.ts";
import { loggedRequest, RequestLog } from "./http/request-log.ts";
import { registerResponseCache } from "./http/response-cache.ts";
import { registerLazySchemaCompilers } from "./http/schema-compilers.ts";
import { withUndecodableSegmentsLiteral } from "./http/undecodable-paths.ts";
import { registerUploadSlots } from "./http/upload-bodies.ts";
import { unstorableParamsError, unstorableTextErrors } from "./http/validation.ts";
import { apiKeyRoutes } from "./identity/routes/api-keys.ts";
import { consoleRoutes } from "./identity/routes/index.ts";
import { livestreamRoutes } from "./livestream/routes.ts";
import { mediaRoutes } from "./media/routes/index.ts";
import { registerMetrics } from "./ops/metrics-endpoint.ts";
import { opsRoutes } from "./ops/routes.ts";
import type { CoreDeps, Services } from "./services.ts";
import { OutageLog } from "./store/unavailable.ts";
import { API_VERSION } from "./version.ts";
import { embedRoutes } from "./video/embed.ts";
import { uploadRoutes } from "./video/uploads/routes.ts";
import { webhookRoutes } from "./webhooks/routes.ts";

/** The API reference page's script, served by the Scalar plugin (compressed by `CompressedOnce`). */
const REFERENCE_SCRIPT = "/docs/js/scalar.js";

/** The API listener: plugins, conventions and every domain's routes. */
export async function buildApp(deps: CoreDeps, services: Services): Promise<FastifyInstance> {
  const { config, store, redis } = deps;
  const app = Fastify({
    // Requests are logged with credentials in their query masked, whichever logger was given.
    loggerInstance: deps.logger.child({}, { serializers: { req: loggedRequest } }),
    genReqId: requestId,
    logController: new RequestLog(),
    // The reference page answers at `/docs` itself rather than redirecting to `/docs/`.
    rewriteUrl: (request) =>
      request.url === "/docs" ? "/docs/" : withUndecodableSegmentsLiteral(request.url ?? "/"),
    bodyLimit: config.limits.jsonBodyBytes,
    // Only the operator's own proxies may say who the client is: anyone else could pick an address
    // for each request and so a fresh sign-in budget.
    trustProxy: config.trustProxy.length > 0 ? config.trustProxy : false,
    // A path parameter of any length reaches its route, whose schema answers for it (a cloud id's
    // "Disk not found", an unknown location's "no route"); the URL's own limit is the header size.
    routerOptions: { ignoreTrailingSlash: true, querystringParser: parseFormText, maxParamLength: 16 * 1024 },
    frameworkErrors,
    serverFactory: (handler) => createHttpServer(config, handler, clientErrorBody),
    clientErrorHandler: clientErrorHandler(clientErrorBody, deps.logger),
    // While shutting down, a request that reaches us on an open keep-alive connection is served
    // (with `Connection: close`, see below) rather than refused with a 503 the client would see.
    return503OnClosing: false,
  }).withTypeProvider<TypeBoxTypeProvider>();

  // From the moment shutdown begins, every answer (those in flight included) tells keep-alive
  // clients to reconnect, so they move to another node instead of meeting a closed socket.
  let draining = false;
  app.addHook("preClose", async () => {
    stopListening(app.server);
    draining = true;
    await drainConnections(app.server, config.listener.shutdownGraceMs);
  });
  // One synchronous hook for what every answer carries (a callback hook costs no promise per request).
  app.addHook("onSend", (request, reply, payload, done) => {
    reply.header("x-request-id", request.id);
    // Answers are per caller, and shared caches cannot see the `apikey` or `X-API-Key` headers that
    // say who asked (only `Authorization` keeps them away): none may store an answer unless its
    // route says otherwise (the console's assets, the embed page).
    if (!reply.hasHeader("cache-control")) reply.header("cache-control", "no-store");
    if (draining) reply.header("connection", "close");
    // An answer before the body was read: its client may still be sending (see the function).
    if (!request.raw.complete) lingerAfterEarlyAnswer(request.raw.socket);
    done(null, payload);
  });

  app.server.on("checkExpectation", expectationFailedHandler(clientErrorBody));
  continueWhenRead(app.server);
  registerMetrics(app, deps.metrics, config);
  registerLazySchemaCompilers(app, deps.logger);
  registerAuthDecorators(app, config.publicUrl);
  // Console sessions travel in a cookie (docs/console.md); only the API listener reads cookies.
  await app.register(cookie);
  registerErrorHandling(app);
  acceptJsonBodies(app, { maxDepth: config.limits.jsonDepth });
  registerUploadSlots(app, config.limits.concurrentUploadsPerKey);
  app.addHook("preValidation", (request, _reply, done) => {
    // A request without a body, whatever type it names, or with an empty JSON one is read as `{}`,
    // so each required field is reported by name (and operations whose fields are all optional just
    // work); a body of the wrong JSON type is a 400 Invalid Request (json-bodies.ts).
    if (
      request.body === undefined &&
      (!sendsBody(request) || /^(application\/json\b|$)/i.test(request.headers["content-type"] ?? "")) &&
      (request.routeOptions.schema?.body as { type?: string } | undefined)?.type === "object"
    ) {
      request.body = {};
    }
    lowerCaseUuids(request.params);
    lowerCaseUuids(request.query);
    request.body = lowerCaseIdFields(
      request.routeOptions.schema?.body as IdentifierSchema | undefined,
      request.body,
    );
    const refusedParams = unstorableParamsError(request.params);
    if (refusedParams) return done(refusedParams);
    const errors = [...unstorableTextErrors(request.query), ...unstorableTextErrors(request.body)];
    done(errors.length > 0 ? ApiError.validation(errors) : undefined);
  });

  await app.register(swagger, {
    transform: ({ schema, url, route }) => ({
      schema: documentedSchema(schema, route.method, !isDeveloperModeCall(url)),
      url,
    }),
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "Cumulo API",
        version: API_VERSION,
        description:
          "Cloud resources, CDN and video platform API. Media and CDN answer in an envelope, the livestream health check and cloud bare objects.",
      },
      servers: [{ url: config.publicUrl ?? "/" }],
      components: {
        securitySchemes: {
          bearer: { type: "http", scheme: "bearer" },
          apiKeyHeader: { type: "apiKey", in: "header", name: "X-API-Key" },
          cloudApiKey: { type: "apiKey", in: "header", name: "apikey" },
          uploadSignature: { type: "apiKey", in: "header", name: "AuthorizationSignature" },
          consoleSession: {
            type: "apiKey",
            in: "cookie",
            name: "cumulo_session",
            description:
              "The console's session (POST /v1/console/session); named __Host-cumulo_session when Cumulo is served over HTTPS. Accepted by every API route when no key header is sent; unsafe methods, and the GETs that create what they answer (GET /v1/storage/user and /v1/storage/user/keys), also need the session's X-CSRF-Token header.",
          },
        },
      },
    },
  });
  // Before the rate limit: the console's static files are not API requests (its API calls are counted).
  await app.register(consolePages, { dir: config.consoleDir });
  await registerRateLimit(
    app,
    config.rateLimit,
    redis && { client: redis, prefix: config.redisPrefix },
    deps.metrics.rateLimitRefused,
  );
  app.decorate(
    "failedAuth",
    await FailedAuthThrottle.create(app, config.failedAuthRateLimit, deps.bus, deps.metrics.rateLimitRefused),
  );

  // Before the routes: it wraps those marked `storedDataOnly` as they are added.
  if (config.keptAnswers) {
    const { generation } = store;
    // Resolves after the first attempt to listen (PostgreSQL); until one succeeds nothing is kept.
    // Once when lost and once when heard again: a minute's outage wrote the warning once a second.
    // Every loss is the store's absence here, whatever the error (or none).
    const listening = new OutageLog(
      deps.logger,
      {
        outage: "kept answers off until store changes are heard again",
        back: "store changes heard again: kept answers on",
      },
      () => true,
    );
    await generation.start?.(
      (error) => listening.failed(error),
      () => listening.succeeded(),
    );
    // Developer mode's injected faults are preHandler hooks, which an early answer would pass by.
    registerResponseCache(app, generation, { answerEarly: !config.devMode });
  }
  await app.register(devModeRoutes, { deps, services });
  await app.register(opsRoutes, { store });
  // Written once: the routes are fixed once the app is ready, and the document is large while this
  // route is open to anyone and not rate limited.
  let openApiText: string | undefined;
  const openApiAnswer = new CompressedOnce();
  app.get(
    "/openapi.json",
    { schema: { hide: true }, config: { rateLimit: false } },
    async (request, reply) => {
      openApiText ??= JSON.stringify(publishedDocument(app.swagger()));
      const body = await openApiAnswer.encode(request, reply, openApiText);
      return reply.type("application/json; charset=utf-8").send(body ?? undefined);
    },
  );
  await app.register(async (docs) => {
    const script = new CompressedOnce();
    docs.addHook("onSend", async (request, reply, payload) => {
      // Never framed, as the console is not: the page shares the console's origin, and a tenant's page
      // on the edge (the same site) could otherwise frame it (docs/security.md).
      reply.header("x-frame-options", "DENY").header("content-security-policy", "frame-ancestors 'none'");
      if (request.routeOptions.url !== REFERENCE_SCRIPT || typeof payload !== "string") return payload;
      return script.encode(request, reply, payload);
    });
    await docs.register(scalar, {
      routePrefix: "/docs",
      // An absolute script address, so the page works at `/docs` as well as `/docs/`.
      configuration: { url: "/openapi.json", title: "Cumulo API reference", cdn: REFERENCE_SCRIPT },
    });
  });

  await app.register(consoleRoutes, {
    prefix: "/v1/console",
    identity: services.identity,
    console: services.console,
    signInLimit: config.signInRateLimit,
  });
  await app.register(apiKeyRoutes, { prefix: "/v1/organization", identity: services.identity });
  await app.register(livestreamRoutes, { prefix: "/v1/livestream", store, identity: services.identity });
  await app.register(mediaRoutes, {
    prefix: "/v1/media",
    media: services.media,
    video: services.video,
    identity: services.identity,
    config,
  });
  await app.register(uploadRoutes, {
    prefix: "/v1/media",
    uploads: services.uploads,
    identity: services.identity,
    config,
  });
  await app.register(embedRoutes, { media: services.media, video: services.video, config });
  await app.register(webhookRoutes, {
    prefix: "/v1/media/libraries/:libraryId/webhooks",
    identity: services.identity,
    webhooks: services.webhookEndpoints,
  });
  for (const at of CLOUD_PREFIXES) {
    await app.register(cloudRoutes, {
      prefix: at,
      at,
      cloud: services.cloud,
      identity: services.identity,
      maxJsonDepth: config.limits.jsonDepth,
    });
  }
  await app.register(s3EndpointRoutes);
  await app.register(cdnRoutes, {
    prefix: "/v1/cdn",
    identity: services.identity,
    cdn: services.cdn,
    analytics: services.cdnAnalytics,
    maxPurgePaths: config.limits.purgePaths,
  });

  return app;
}
