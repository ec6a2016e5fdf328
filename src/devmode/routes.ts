import { pipeline, Transform } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { type Static, Type } from "@sinclair/typebox";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fastifyPlugin from "fastify-plugin";
import { parse as parseYaml } from "yaml";
import { LATEST_CLOCK_INSTANT, OffsetClock } from "../clock.ts";
import { organizationOfRequest } from "../http/acting-organization.ts";
import { MISSING_MEDIA_CREDENTIAL, presentedKey } from "../http/auth.ts";
import { clientNetwork } from "../http/client-address.ts";
import { ApiError, type FieldError } from "../http/errors.ts";
import { nestsDeeperThan } from "../http/json-bodies.ts";
import { refuseOverBudget } from "../http/rate-limit.ts";
import { expecting, mediaErrorResponses, StringEnum, Timestamp, Uuid } from "../http/schemas.ts";
import { schemeOf } from "../http/scheme.ts";
import { isSelfRequest } from "../http/self-requests.ts";
import { DEFAULT_ORGANIZATION_NAME } from "../identity/service.ts";
import type { CoreDeps, Services } from "../services.ts";
import {
  FAULT_METHODS,
  FAULT_TARGETS,
  FAULT_VIDEO_STAGES,
  FaultRules,
  ownFailureBody,
  registeredTemplate,
} from "./faults.ts";
import { PlaceholderRenditions } from "./placeholder.ts";
import { DEV_PREFIX, isDeveloperModeCall } from "./prefix.ts";
import { DEFAULT_BODY_LIMIT, Har, Recorder } from "./recording.ts";
import { SeedBody, SeededOrganization, type SeedOutcome, seedAtomically, YAML_TYPES } from "./seed.ts";
import {
  createStateService,
  FILES_IN_BUCKET,
  FILES_IN_BUCKET_MESSAGE,
  SNAPSHOT_NAME,
} from "./state-service.ts";
import { LIBRARY_STOP_STAGES, Transitions, VIDEO_STOP_STAGES } from "./transitions.ts";

/** Bodies a recording keeps as they arrive: those the API parses whole, JSON and forms. */
const RECORDED_BODY_TYPES = /^\s*application\/(json|x-www-form-urlencoded)\s*(;|$)/i;

const parsesAsJson = (text: string): boolean => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

interface SentBody {
  chunks: Buffer[];
  size: number;
}

declare module "fastify" {
  interface FastifyInstance {
    /** Developer mode's seed (all or nothing), for `cumulo dev --seed`; absent when the mode is off. */
    devSeed?: (seed: SeedBody) => Promise<SeedOutcome>;
  }
}

/** What developer mode offers, as `cumulo dev` prints it and `GET /_cumulo` answers it. */
export const DEV_MODE_OFFERS = [
  "POST   /_cumulo/state/reset                  empty the store or one organization_id (to: bootstrap | empty)",
  "PUT    /_cumulo/state/snapshots/{name}       save the store and blobs",
  "POST   /_cumulo/state/snapshots/{name}/load  restore them",
  "GET    /_cumulo/state/snapshots              list snapshots",
  "POST   /_cumulo/state/seed                   add a known world (JSON or YAML)",
  "GET    /_cumulo/transitions, PUT, DELETE     videos and libraries: real | instant | {stop_at}",
  "GET    /_cumulo/time, POST /_cumulo/time     read or move the clock (advance_ms, to, real)",
  "GET    /_cumulo/faults, POST, DELETE         fault rules (status, latency, probability, count)",
  "                                             target: http | webhook (status, timeout) | video (stage, stop)",
  "POST   /_cumulo/recording                    record an organization's requests (recording: true | false)",
  "GET    /_cumulo/recording.har                download an organization's recording (HAR 1.2)",
];
const tags = ["dev-mode"];
/** An admin key of the bootstrap organization, in either media header (`requireOperator`). */
const security: Record<string, string[]>[] = [{ bearer: [] }, { apiKeyHeader: [] }];

/** Where one of several fields is needed and none is given, each is reported missing (the contract). */
const eachRequired = (fields: string[], message: string): FieldError[] =>
  fields.map((field) => ({ field, code: "validation_required", message }));

const Snapshot = Type.Object({ name: Type.String(), created_at: Timestamp });
const SnapshotName = Type.String({
  pattern: SNAPSHOT_NAME,
  ...expecting("1 to 40 lower-case letters, digits or _"),
});
const Done = Type.Object({ done: Type.Boolean(), duration_ms: Type.Number() });
const TimeView = Type.Object({ now: Timestamp, offset_ms: Type.Integer() });
const TimeChange = Type.Object({
  advance_ms: Type.Optional(Type.Integer({ minimum: 0 })),
  to: Type.Optional(Timestamp),
  real: Type.Optional(Type.Boolean()),
});
const FaultInput = Type.Object({
  target: Type.Optional(StringEnum(FAULT_TARGETS)),
  url_prefix: Type.Optional(Type.String({ minLength: 1 })),
  timeout: Type.Optional(Type.Boolean()),
  library_id: Type.Optional(Uuid),
  video_id: Type.Optional(Uuid),
  stage: Type.Optional(StringEnum(FAULT_VIDEO_STAGES)),
  stop: Type.Optional(Type.Boolean()),
  route: Type.Optional(Type.String({ minLength: 1 })),
  path_prefix: Type.Optional(Type.String({ minLength: 1 })),
  method: Type.Optional(StringEnum(FAULT_METHODS)),
  organization_id: Type.Optional(Uuid),
  status: Type.Optional(Type.Integer({ minimum: 400, maximum: 599 })),
  latency_ms: Type.Optional(Type.Integer({ minimum: 1, maximum: 60_000 })),
  probability: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  count: Type.Optional(Type.Integer({ minimum: 1 })),
});
const Fault = Type.Composite([
  Type.Omit(FaultInput, ["probability", "count", "target"]),
  Type.Object({
    id: Uuid,
    target: StringEnum(FAULT_TARGETS),
    probability: Type.Number(),
    remaining: Type.Union([Type.Integer(), Type.Null()]),
    hits: Type.Integer(),
  }),
]);

const RecordingStatus = Type.Object({
  organization_id: Uuid,
  recording: Type.Boolean(),
  entries: Type.Integer(),
});
const OrganizationQuery = Type.Object({ organization_id: Uuid });

const VideoTransition = Type.Union([
  StringEnum(["real", "instant"] as const),
  Type.Object({ stop_at: StringEnum(VIDEO_STOP_STAGES) }, { additionalProperties: false }),
]);
const LibraryTransition = Type.Union([
  StringEnum(["real", "instant"] as const),
  Type.Object({ stop_at: StringEnum(LIBRARY_STOP_STAGES) }, { additionalProperties: false }),
]);
const TransitionsView = Type.Object({
  default: Type.Object({ video: VideoTransition, library: LibraryTransition }),
  organizations: Type.Array(
    Type.Object({
      organization_id: Uuid,
      video: Type.Optional(VideoTransition),
      library: Type.Optional(LibraryTransition),
    }),
  ),
});

interface DevModeOptions {
  deps: CoreDeps;
  services: Services;
}

/**
 * The field errors of a seed's refused call, named from the seed's root (`organizations.0.libraries.1.name`)
 * as the seed's own validation names them, so a harness finds the field without parsing the message.
 * Undefined when the refusal named no fields (a 409, a cloud route's answer).
 */
function refusedFields(step: string, answer: unknown): FieldError[] | undefined {
  const errors = (answer as { errors?: unknown } | null)?.errors;
  if (!Array.isArray(errors)) return undefined;
  const at = step.replace(/\[(\d+)\]/g, ".$1");
  return (errors as FieldError[]).map((error) => ({ ...error, field: `${at}.${error.field}` }));
}

/** Only the operator may use developer mode: a non-read-only key of the bootstrap (default) organization. */
async function requireOperator(request: FastifyRequest, services: Services): Promise<void> {
  const secret = presentedKey(request, "media");
  // The media group's answer, which names the headers to use: a key sent as the cloud's `apikey`
  // is not looked at, and "an operator key is required" left its sender guessing why.
  if (!secret) throw ApiError.unauthorized(MISSING_MEDIA_CREDENTIAL, "auth_type_not_found");
  const auth = await services.identity.authenticate(secret);
  if (!auth) throw ApiError.unauthorized("Invalid authentication credentials");
  const operator = (await services.identity.listOrganizations()).find(
    (org) => org.name === DEFAULT_ORGANIZATION_NAME,
  );
  if (auth.organizationId !== operator?.id || auth.readOnly || auth.kind === "cloud_token") {
    throw ApiError.forbidden("Developer mode needs an admin key of the bootstrap organization");
  }
}

/**
 * Developer mode (docs/dev-mode.md): with CUMULO_DEV_MODE off nothing is registered, so `/_cumulo/`
 * answers the ordinary 404. Not encapsulated: the fault hook applies to every route of the app.
 */
export const devModeRoutes = fastifyPlugin(
  async (app: FastifyInstance, { deps, services }: DevModeOptions) => {
    if (!deps.config.devMode) return;
    const state = createStateService(deps, services);
    const faults = new FaultRules();
    const clock = deps.clock instanceof OffsetClock ? deps.clock : undefined;
    const recorder = new Recorder();
    const transitions = new Transitions(deps.config.devTransitions);
    const placeholder = PlaceholderRenditions.of(deps.config);
    /** Whether a route of the app has this template (any parameter names), for the method or any. */
    const isRoute = (route: string, method: string | undefined) =>
      FAULT_METHODS.some(
        (candidate) =>
          (method === undefined || method === candidate) &&
          app.hasRoute({ method: candidate, url: registeredTemplate(route) }),
      );
    // A rule or recording for an id no organization has would never apply: most likely a typo.
    const requireOrganization = async (organizationId: string | undefined) => {
      if (organizationId !== undefined && !(await services.identity.organizationName(organizationId))) {
        throw ApiError.notFound("Organization");
      }
    };
    const seed = (body: SeedBody) =>
      seedAtomically(app, state, services.identity, body, () => placeholder.mp4());

    services.video.pipeline.transition = (organizationId) => {
      const rule = transitions.of(organizationId).video;
      if (rule === "real") return undefined;
      return {
        placeholder: () => placeholder.get(),
        ...(rule === "instant" ? {} : { stopAt: rule.stop_at }),
      };
    };
    services.media.libraries.transition = (organizationId) => {
      const rule = transitions.of(organizationId).library;
      return rule === "real" ? undefined : rule === "instant" ? "instant" : "stop";
    };
    app.decorate("devSeed", seed);

    services.webhookDispatcher.injectFault = (url) => {
      const rule = faults.takeWebhook(url);
      if (!rule) return undefined;
      deps.logger.warn({ fault: rule.id, url }, "developer mode: injected webhook fault");
      const what = rule.timeout ? "timed out" : `answered ${rule.status}`;
      return {
        success: false,
        status: rule.timeout ? 0 : (rule.status ?? 500),
        body: "",
        error: `injected fault ${rule.id}: ${what}`,
        durationMs: 0,
        retryAfter: undefined,
      };
    };
    services.video.pipeline.injectFault = (payload, stage) => {
      const rule = faults.takeVideo(payload, stage);
      if (!rule) return undefined;
      deps.logger.warn(
        { fault: rule.id, video: payload.videoId, stage },
        "developer mode: injected video fault",
      );
      return rule.stop ? { stop: true } : { fail: `injected fault ${rule.id}: failed at ${stage}` };
    };
    const requestStarts = new WeakMap<FastifyRequest, { at: Date; mark: number }>();
    /** The bytes of recorded requests' bodies as they arrived, before parsing and validation. */
    const sentBodies = new WeakMap<FastifyRequest, SentBody>();

    app.addHook("onRequest", async (request) => {
      requestStarts.set(request, { at: deps.clock.now(), mark: performance.now() });
    });
    // A recorded request's JSON or form body is kept as it arrives: validation fills in defaults and
    // converts types in the parsed body, which the client never sent. Only bodies that a parser
    // reads whole (the JSON body limit bounds them) are kept; uploads stream on unrecorded.
    app.addHook("preParsing", async (request, _reply, payload) => {
      const organizationId = request.auth?.organizationId;
      if (
        !organizationId ||
        isDeveloperModeCall(request.url) ||
        !RECORDED_BODY_TYPES.test(request.headers["content-type"] ?? "") ||
        !recorder.isRecording(organizationId)
      ) {
        return payload;
      }
      const sent: SentBody = { chunks: [], size: 0 };
      sentBodies.set(request, sent);
      const keep = deps.config.limits.jsonBodyBytes;
      const tee = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          if (sent.size < keep) sent.chunks.push(chunk.subarray(0, keep - sent.size));
          sent.size += chunk.length;
          done(null, chunk);
        },
      });
      // Fastify counts the bytes of the stream it reads against the limit, as without the copy.
      return pipeline(payload, tee, () => {});
    });
    /** Requests whose answer went through `onSend` and was recorded there. */
    const recorded = new WeakSet<FastifyRequest>();
    const record = (request: FastifyRequest, reply: FastifyReply, responseBody: string | undefined) => {
      const organizationId = organizationOfRequest(request);
      const started = requestStarts.get(request);
      if (!organizationId || !started || isDeveloperModeCall(request.url)) return;
      if (!recorder.isRecording(organizationId)) return;
      recorded.add(request);
      recorder.record(organizationId, {
        startedAt: started.at,
        durationMs: Math.round((performance.now() - started.mark) * 10) / 10,
        method: request.method,
        // As the client sent it: `request.url` is after `rewriteUrl` (an undecodable `%zz` as `%25zz`).
        url: `${schemeOf(request)}://${request.host}${request.originalUrl}`,
        path: request.originalUrl,
        requestHeaders: flatHeaders(request.headers),
        ...sentBodyOf(request),
        requestMimeType: String(request.headers["content-type"] ?? ""),
        status: reply.statusCode,
        responseHeaders: flatHeaders(reply.getHeaders()),
        responseBody,
        responseMimeType: String(reply.getHeader("content-type") ?? ""),
      });
    };
    // Recorded as the answer leaves: by then authentication has named the organization.
    app.addHook("onSend", async (request, reply, payload) => {
      record(
        request,
        reply,
        typeof payload === "string" || Buffer.isBuffer(payload) ? String(payload) : undefined,
      );
      return payload;
    });
    // An answer written by its handler itself (tus uploads take over the reply) passes no `onSend`:
    // recorded once sent, without its body (QA of 6 December: resumable uploads were missing).
    app.addHook("onResponse", async (request, reply) => {
      if (!recorded.has(request)) record(request, reply, undefined);
    });

    app.addHook("preHandler", async (request, reply) => {
      // API requests only: not /healthz, /metrics or the console's files, which a harness waits on;
      // nor the calls a seed makes through the API, which are part of a developer-mode call.
      if (request.apiGroup === undefined || isDeveloperModeCall(request.url) || isSelfRequest(request)) {
        return;
      }
      const rule = faults.take({
        route: request.routeOptions.url,
        path: request.url.split("?")[0] ?? request.url,
        method: request.method,
        organizationId: request.auth?.organizationId,
      });
      if (!rule) return;
      reply.header("x-cumulo-fault", rule.id);
      request.log.warn({ fault: rule.id, url: request.url }, "developer mode: injected fault");
      if (rule.latency_ms) await sleep(rule.latency_ms);
      if (!rule.status) return;
      const own = ownFailureBody(request.routeOptions.url, rule.status);
      if (own) return reply.code(rule.status).send(own);
      throw new ApiError(rule.status, `Fault injected by developer mode rule ${rule.id}`);
    });

    /** Clock moved: jobs and webhook retries that fell due run now rather than at their next poll. */
    const wakeWorkers = () => {
      services.jobs.notify();
      services.webhooks.notify();
    };

    await app.register(
      (async (dev) => {
        // Wrong or missing keys are counted per client address, with console sign-in's budget (as
        // invitations are): once it is spent they answer 429 instead of 401. The operator's own
        // calls are never counted nor refused (docs/dev-mode.md).
        const limitFailedKeys = app.createRateLimit({
          max: deps.config.signInRateLimit.max,
          timeWindow: deps.config.signInRateLimit.windowMs,
          keyGenerator: (request) => `operator-key:ip:${clientNetwork(request.ip)}`,
          // Not the API budget's list, which leaves developer mode's calls out.
          allowList: () => false,
        });
        dev.addHook("onRequest", async (request) => {
          try {
            await requireOperator(request, services);
          } catch (error) {
            if (error instanceof ApiError && error.status === 401) {
              await refuseOverBudget(limitFailedKeys, request);
            }
            throw error;
          }
        });
        // A seed may be YAML (the same schema as JSON).
        dev.addContentTypeParser(YAML_TYPES, { parseAs: "string" }, (_request, text, done) => {
          try {
            const parsed: unknown = parseYaml(String(text));
            // The bound of a JSON body (docs/decisions.md): as deep a structure is refused alike.
            if (nestsDeeperThan(JSON.stringify(parsed) ?? "", deps.config.limits.jsonDepth)) {
              return done(ApiError.invalidRequest());
            }
            done(null, parsed);
          } catch (error) {
            // Deep enough to exhaust the parser's stack (the yaml package reports it as a parse error
            // with the engine's message): the same refusal, without that message.
            const message = (error as Error).message;
            if (error instanceof RangeError || message.includes("Maximum call stack size exceeded")) {
              return done(ApiError.invalidRequest());
            }
            done(ApiError.invalidRequest(`The body is not valid YAML: ${message}`));
          }
        });
        const timed = async (work: () => Promise<unknown>) => {
          const started = performance.now();
          await work();
          return { done: true, duration_ms: Math.round((performance.now() - started) * 10) / 10 };
        };

        dev.get(
          "/",
          {
            schema: {
              operationId: "getDevMode",
              tags,
              security,
              summary: "What developer mode offers",
              response: { 200: Type.Object({ offers: Type.Array(Type.String()) }), ...mediaErrorResponses },
            },
          },
          async () => ({ offers: DEV_MODE_OFFERS }),
        );

        dev.post(
          "/state/reset",
          {
            schema: {
              operationId: "resetDevState",
              tags,
              security,
              summary:
                "Empty the store and blobs, or one `organization_id`; `bootstrap` (default) keeps the default organization (or that organization with its keys)",
              bodyOptional: true,
              body: Type.Object({
                to: Type.Optional(StringEnum(["bootstrap", "empty"] as const)),
                organization_id: Type.Optional(Uuid),
              }),
              response: {
                200: Type.Composite([Done, Type.Object({ generated_key: Type.Optional(Type.String()) })]),
                ...mediaErrorResponses,
              },
            },
          },
          async (request) => {
            const { to = "bootstrap", organization_id } = request.body;
            if (organization_id !== undefined) {
              const started = performance.now();
              const { outcome } = await state.resetOrganization(organization_id, to);
              if (outcome === "not_found") throw ApiError.notFound("Organization");
              return { done: true, duration_ms: Math.round((performance.now() - started) * 10) / 10 };
            }
            let generatedKey: string | undefined;
            const result = await timed(async () => {
              ({ generatedKey } = await state.reset(to));
              faults.clear();
            });
            return { ...result, ...(generatedKey ? { generated_key: generatedKey } : {}) };
          },
        );

        dev.get(
          "/state/snapshots",
          {
            schema: {
              operationId: "listDevSnapshots",
              tags,
              security,
              summary: "Saved snapshots",
              response: { 200: Type.Object({ snapshots: Type.Array(Snapshot) }), ...mediaErrorResponses },
            },
          },
          async () => ({ snapshots: await state.list() }),
        );

        dev.put(
          "/state/snapshots/:name",
          {
            config: { paramsNameNewResource: true },
            schema: {
              operationId: "saveDevSnapshot",
              tags,
              security,
              summary: "Save the store and blobs as a named snapshot (replacing one of that name)",
              params: Type.Object({ name: SnapshotName }),
              response: {
                200: Type.Composite([Done, Type.Object({ snapshot: Snapshot })]),
                ...mediaErrorResponses,
              },
            },
          },
          async (request) => {
            let snapshot: Static<typeof Snapshot> | undefined;
            const result = await timed(async () => {
              const saved = await state.save(request.params.name);
              if (saved.outcome === FILES_IN_BUCKET) throw ApiError.conflict(FILES_IN_BUCKET_MESSAGE);
              snapshot = saved.snapshot;
            });
            return { ...result, snapshot: snapshot as Static<typeof Snapshot> };
          },
        );

        dev.post(
          "/state/snapshots/:name/load",
          {
            schema: {
              operationId: "loadDevSnapshot",
              tags,
              security,
              summary: "Replace the store and blobs with a snapshot",
              params: Type.Object({ name: SnapshotName }),
              response: { 200: Done, ...mediaErrorResponses },
            },
          },
          async (request) => {
            const started = performance.now();
            const loaded = await state.load(request.params.name);
            switch (loaded.outcome) {
              case "loaded":
                return { done: true, duration_ms: Math.round((performance.now() - started) * 10) / 10 };
              case "not_found":
                throw ApiError.notFound("Snapshot");
              case "schema_mismatch":
                throw ApiError.conflict("The snapshot was saved at another schema version");
              case FILES_IN_BUCKET:
                throw ApiError.conflict(FILES_IN_BUCKET_MESSAGE);
            }
          },
        );

        dev.delete(
          "/state/snapshots/:name",
          {
            schema: {
              operationId: "deleteDevSnapshot",
              tags,
              security,
              summary: "Delete a snapshot",
              params: Type.Object({ name: SnapshotName }),
              response: { 204: Type.Null(), ...mediaErrorResponses },
            },
          },
          async (request, reply) => {
            const removed = await state.remove(request.params.name);
            switch (removed.outcome) {
              case "deleted":
                return reply.code(204).send(null);
              case "not_found":
                throw ApiError.notFound("Snapshot");
            }
          },
        );

        dev.post(
          "/state/seed",
          {
            schema: {
              operationId: "seedDevState",
              tags,
              security,
              summary:
                "Add a known world (organizations, keys, libraries, videos, distributions, other calls) through the API",
              consumes: ["application/json", ...YAML_TYPES],
              body: SeedBody,
              response: {
                200: Type.Object({ organizations: Type.Array(SeededOrganization) }),
                ...mediaErrorResponses,
              },
            },
          },
          async (request) => {
            const seeded = await seed(request.body);
            switch (seeded.outcome) {
              case "seeded":
                return { organizations: seeded.organizations };
              case "failed":
                throw new ApiError(
                  400,
                  `Seeding stopped at ${seeded.step}: ${seeded.status} ${JSON.stringify(seeded.answer)}`,
                  { fieldErrors: refusedFields(seeded.step, seeded.answer) },
                );
            }
          },
        );

        dev.get(
          "/transitions",
          {
            schema: {
              operationId: "getDevTransitions",
              tags,
              security,
              summary:
                "How videos and libraries move through their statuses, for everyone and per organization",
              response: { 200: TransitionsView, ...mediaErrorResponses },
            },
          },
          async () => transitions.view(),
        );

        dev.put(
          "/transitions",
          {
            schema: {
              operationId: "setDevTransitions",
              tags,
              security,
              summary:
                "Video processing and library provisioning: `real`, `instant` (no ffmpeg, placeholder renditions) or `{stop_at}` a stage",
              body: Type.Object({
                organization_id: Type.Optional(Uuid),
                video: Type.Optional(VideoTransition),
                library: Type.Optional(LibraryTransition),
              }),
              response: { 200: TransitionsView, ...mediaErrorResponses },
            },
          },
          async (request) => {
            const { organization_id, video, library } = request.body;
            if (video === undefined && library === undefined) {
              throw ApiError.validation(eachRequired(["video", "library"], "Give video, library or both"));
            }
            await requireOrganization(organization_id);
            transitions.set(organization_id, { video, library });
            return transitions.view();
          },
        );

        dev.delete(
          "/transitions",
          {
            schema: {
              operationId: "clearDevTransitions",
              tags,
              security,
              summary:
                "Drop one organization's transition rules, or (without organization_id) all: back to real",
              querystring: Type.Object({ organization_id: Type.Optional(Uuid) }),
              response: { 204: Type.Null(), ...mediaErrorResponses },
            },
          },
          async (request, reply) => {
            const { organization_id } = request.query;
            // Rules of an organization removed since can still be dropped.
            if (organization_id !== undefined && !transitions.has(organization_id)) {
              await requireOrganization(organization_id);
            }
            transitions.clear(organization_id);
            return reply.code(204).send(null);
          },
        );

        dev.get(
          "/time",
          {
            schema: {
              operationId: "getDevTime",
              tags,
              security,
              summary: "The server's clock",
              response: { 200: TimeView, ...mediaErrorResponses },
            },
          },
          async () => timeView(),
        );

        dev.post(
          "/time",
          {
            schema: {
              operationId: "setDevTime",
              tags,
              security,
              summary: "Move the clock: forward by `advance_ms`, to an instant `to`, or back to `real` time",
              body: TimeChange,
              response: { 200: TimeView, ...mediaErrorResponses },
            },
          },
          async (request) => {
            if (!clock) throw ApiError.conflict("This server's clock is injected and cannot be moved");
            const { advance_ms, to, real } = request.body;
            const given = [advance_ms, to, real].filter((value) => value !== undefined).length;
            if (given === 0) {
              throw ApiError.validation(
                eachRequired(["advance_ms", "to", "real"], "Give exactly one of advance_ms, to, real"),
              );
            }
            if (given > 1) {
              throw ApiError.field(
                "advance_ms",
                "validation_max",
                "Give exactly one of advance_ms, to, real",
              );
            }
            // `false` would ask for nothing: the clock moves by `advance_ms` or `to`.
            if (real === false) {
              throw ApiError.field(
                "real",
                "validation_enum",
                "real takes only true (back to real time); give advance_ms or to to move the clock.",
              );
            }
            const realNow = Date.now();
            // Moved on from what the clock reads: stopped at its last instant, `advance_ms: 0` is allowed.
            const offsetMs = real
              ? 0
              : to !== undefined
                ? Date.parse(to) - realNow
                : clock.now().getTime() + (advance_ms ?? 0) - realNow;
            // A year short of the last date with a four-digit year: what is reckoned ahead of it fits.
            if (realNow + offsetMs > LATEST_CLOCK_INSTANT) {
              throw ApiError.field(
                to !== undefined ? "to" : "advance_ms",
                "validation_max",
                `The clock cannot move past ${new Date(LATEST_CLOCK_INSTANT).toISOString()}.`,
              );
            }
            clock.offsetMs = offsetMs;
            wakeWorkers();
            return timeView();
          },
        );

        dev.get(
          "/faults",
          {
            schema: {
              operationId: "listDevFaults",
              tags,
              security,
              summary: "Fault rules in force",
              response: { 200: Type.Object({ faults: Type.Array(Fault) }), ...mediaErrorResponses },
            },
          },
          async () => ({ faults: faults.list() }),
        );

        dev.post(
          "/faults",
          {
            schema: {
              operationId: "addDevFault",
              tags,
              security,
              summary: "Add a fault rule: matching requests answer `status` and/or wait `latency_ms`",
              body: FaultInput,
              response: { 201: Fault, ...mediaErrorResponses },
            },
          },
          async (request, reply) => {
            const input = request.body;
            const target = input.target ?? "http";
            if (target === "http" && input.status === undefined && input.latency_ms === undefined) {
              throw ApiError.validation(
                eachRequired(["status", "latency_ms"], "Give status, latency_ms or both"),
              );
            }
            if (target === "webhook" && input.status === undefined && !input.timeout) {
              throw ApiError.validation(eachRequired(["status", "timeout"], "Give status or timeout: true"));
            }
            if (target === "video" && input.stage === undefined) {
              throw ApiError.field("stage", "validation_required", "Give the stage at which the video fails");
            }
            // A rule for a route that does not exist would never apply: most likely a typo.
            if (input.route !== undefined && !isRoute(input.route, input.method)) {
              throw ApiError.field(
                "route",
                "validation_format",
                "No route has this template: give it as registered (/v1/media/libraries/:libraryId/videos) or as /openapi.json names it (/v1/media/libraries/{libraryId}/videos), with a method it answers.",
              );
            }
            await requireOrganization(input.organization_id);
            // As for an organization: a rule for a library that does not exist would never apply.
            if (input.library_id !== undefined && !(await services.libraries.findById(input.library_id))) {
              throw ApiError.notFound("Library");
            }
            return reply.code(201).send(faults.add(input));
          },
        );

        dev.delete(
          "/faults/:faultId",
          {
            schema: {
              operationId: "deleteDevFault",
              tags,
              security,
              summary: "Remove a fault rule",
              params: Type.Object({ faultId: Uuid }),
              response: { 204: Type.Null(), ...mediaErrorResponses },
            },
          },
          async (request, reply) => {
            if (!faults.remove(request.params.faultId)) throw ApiError.notFound("Fault rule");
            return reply.code(204).send(null);
          },
        );

        dev.delete(
          "/faults",
          {
            schema: {
              operationId: "clearDevFaults",
              tags,
              security,
              summary: "Remove every fault rule",
              response: { 204: Type.Null(), ...mediaErrorResponses },
            },
          },
          async (_request, reply) => {
            faults.clear();
            return reply.code(204).send(null);
          },
        );

        dev.get(
          "/recording",
          {
            schema: {
              operationId: "listDevRecordings",
              tags,
              security,
              summary: "Organizations with a recording, whether it is on, and how many entries it holds",
              response: {
                200: Type.Object({ recordings: Type.Array(RecordingStatus) }),
                ...mediaErrorResponses,
              },
            },
          },
          async () => ({ recordings: recorder.status() }),
        );

        dev.post(
          "/recording",
          {
            schema: {
              operationId: "setDevRecording",
              tags,
              security,
              summary: "Turn recording of an organization's requests on or off",
              body: Type.Object({
                organization_id: Uuid,
                recording: Type.Boolean(),
                body_limit_bytes: Type.Optional(Type.Integer({ minimum: 0, maximum: 1024 * 1024 })),
              }),
              response: { 200: RecordingStatus, ...mediaErrorResponses },
            },
          },
          async (request) => {
            const { organization_id, recording, body_limit_bytes } = request.body;
            await requireOrganization(organization_id);
            if (recording) recorder.start(organization_id, body_limit_bytes ?? DEFAULT_BODY_LIMIT);
            else recorder.stop(organization_id);
            return {
              organization_id,
              recording: recorder.isRecording(organization_id),
              entries: recorder.entries(organization_id).length,
            };
          },
        );

        dev.get(
          "/recording.har",
          {
            schema: {
              operationId: "getDevRecordingHar",
              tags,
              security,
              summary: "An organization's recorded requests and responses as a HAR 1.2 file",
              querystring: OrganizationQuery,
              response: {
                200: Har,
                ...mediaErrorResponses,
              },
            },
          },
          async (request, reply) => {
            const { organization_id } = request.query;
            // The recording of an organization removed since can still be read.
            if (!recorder.has(organization_id)) await requireOrganization(organization_id);
            reply.header("content-disposition", `attachment; filename="cumulo-${organization_id}.har"`);
            return recorder.har(organization_id);
          },
        );

        dev.delete(
          "/recording",
          {
            schema: {
              operationId: "clearDevRecording",
              tags,
              security,
              summary: "Drop an organization's recording (and stop it)",
              querystring: OrganizationQuery,
              response: { 204: Type.Null(), ...mediaErrorResponses },
            },
          },
          async (request, reply) => {
            const { organization_id } = request.query;
            if (!recorder.has(organization_id)) await requireOrganization(organization_id);
            recorder.clear(organization_id);
            return reply.code(204).send(null);
          },
        );
      }) satisfies FastifyPluginAsyncTypebox,
      { prefix: DEV_PREFIX },
    );

    function flatHeaders(headers: Record<string, unknown>): Record<string, string> {
      const flat: Record<string, string> = {};
      for (const [name, value] of Object.entries(headers)) {
        if (value !== undefined) flat[name] = Array.isArray(value) ? value.join(", ") : String(value);
      }
      return flat;
    }

    /** The request's body for the recording: as it arrived where it was kept, else as parsed. */
    function sentBodyOf(request: FastifyRequest): { requestBody?: string; requestBodySize?: number } {
      const sent = sentBodies.get(request);
      if (sent !== undefined) {
        if (sent.size === 0) return {};
        const text = Buffer.concat(sent.chunks).toString();
        // A body over the limit, or JSON that does not parse, was refused unread: its fields, and so
        // its credentials, cannot be told apart to be masked. Only its size is recorded.
        const unreadable =
          sent.size > deps.config.limits.jsonBodyBytes ||
          (/json/i.test(request.headers["content-type"] ?? "") && !parsesAsJson(text));
        return unreadable
          ? { requestBodySize: sent.size }
          : { requestBody: text, requestBodySize: sent.size };
      }
      return request.body === undefined ? {} : { requestBody: bodyText(request.body) };
    }

    function bodyText(body: unknown): string {
      return typeof body === "string" ? body : Buffer.isBuffer(body) ? body.toString() : JSON.stringify(body);
    }

    function timeView() {
      return { now: deps.clock.now().toISOString(), offset_ms: clock?.offsetMs ?? 0 };
    }
  },
);
