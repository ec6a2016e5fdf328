import { isUtf8 } from "node:buffer";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "@sinclair/typebox";
import { Metadata } from "@tus/server";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Config } from "../../config.ts";
import { actingOrganization } from "../../http/acting-organization.ts";
import { authenticateRequest, presentedKey, requireApiKey } from "../../http/auth.ts";
import { ok } from "../../http/envelope.ts";
import { ApiError, type FieldError } from "../../http/errors.ts";
import { urlShownTo } from "../../http/read-only-view.ts";
import {
  Envelope,
  HttpUrl,
  IdParams,
  MediaError,
  mediaErrorResponses,
  Nullable,
  StringEnum,
  Timestamp,
} from "../../http/schemas.ts";
import { schemeOf } from "../../http/scheme.ts";
import { holdUploadSlot, uploadSlotKey } from "../../http/upload-bodies.ts";
import { unstorableTextErrors } from "../../http/validation.ts";
import type { IdentityService } from "../../identity/service.ts";
import { isUuid } from "../../ids.ts";
import { TUS_PATH, type UploadServices } from "./index.ts";
import { DEFAULT_UPLOAD_AUTH_TTL_S, MAX_UPLOAD_AUTH_TTL_S } from "./signatures.ts";
import type { VideoUploadRow } from "./tables.ts";
import type { UploadBinding } from "./tus.ts";

export interface UploadRouteOptions {
  uploads: UploadServices;
  identity: IdentityService;
  config: Config;
}

const VideoParams = IdParams("libraryId", "videoId");
const security: Record<string, string[]>[] = [{ bearer: [] }, { apiKeyHeader: [] }];
const tags = ["media: uploads"];

const UploadAuthorizationBody = Type.Object({
  expires_in_s: Type.Optional(
    Type.Integer({
      minimum: 60,
      maximum: MAX_UPLOAD_AUTH_TTL_S,
      description: `Seconds the authorization stays valid (60-${MAX_UPLOAD_AUTH_TTL_S}), default ${DEFAULT_UPLOAD_AUTH_TTL_S}`,
    }),
  ),
});
const UploadAuthorization = Type.Object({
  library_id: Type.String(),
  video_id: Type.String(),
  expires: Type.Integer({ description: "Unix seconds" }),
  signature: Type.String({ description: "Hex HMAC-SHA256, see docs/video.md" }),
  endpoint: Type.String({ description: "The tus endpoint to create the upload at" }),
  headers: Type.Object(
    {
      AuthorizationSignature: Type.String(),
      AuthorizationExpire: Type.String(),
      LibraryId: Type.String(),
      VideoId: Type.String(),
    },
    { description: "Headers to send with every tus request (tus-js-client `headers` option)" },
  ),
});
const FetchBody = Type.Object({
  url: HttpUrl({
    description: "http(s) URL of the video file, on a public address",
    expected: "an http or https URL such as https://files.example.com/video.mp4",
  }),
});
const ImportState = Type.Object({
  video_id: Type.String(),
  url: Type.String(),
  status: StringEnum(["queued", "downloading", "stored", "failed"] as const),
  bytes_received: Type.Integer(),
  content_length: Nullable(Type.Integer()),
  failure_reason: Nullable(Type.String()),
  created_at: Timestamp,
  updated_at: Timestamp,
});

/** Signed upload authorizations and URL imports: ordinary media routes behind the API key. */
const sourceRoutes: FastifyPluginAsyncTypebox<UploadRouteOptions> = async (app, options) => {
  const { uploads, config } = options;
  requireApiKey(app, "media", options.identity);

  app.post(
    "/libraries/:libraryId/videos/:videoId/upload-authorization",
    {
      schema: {
        operationId: "createUploadAuthorization",
        tags,
        summary: "Sign a browser upload of one video's source (tus), without the API key",
        description:
          "The answer's `headers` authorize tus requests (creation, HEAD, PATCH, DELETE) at `endpoint` for this video only, until `expires`. Hand them to the browser (e.g. tus-js-client's `headers` option).",
        security,
        params: VideoParams,
        bodyOptional: true,
        body: UploadAuthorizationBody,
        response: { ...mediaErrorResponses, 201: Envelope(UploadAuthorization) },
      },
    },
    async (request, reply) => {
      const { libraryId, videoId } = request.params;
      const issued = await uploads.authorizations.issue(
        request.auth,
        libraryId,
        videoId,
        request.body.expires_in_s ?? DEFAULT_UPLOAD_AUTH_TTL_S,
      );
      switch (issued.outcome) {
        case "not_found":
          throw ApiError.notFound();
        case "issued": {
          const { signature, expires } = issued;
          const origin = config.publicUrl ?? `${schemeOf(request)}://${request.host}`;
          return reply.code(201).send(
            ok("Upload authorization created successfully", {
              library_id: libraryId,
              video_id: videoId,
              expires,
              signature,
              endpoint: `${origin}${TUS_PATH}`,
              headers: {
                AuthorizationSignature: signature,
                AuthorizationExpire: String(expires),
                LibraryId: libraryId,
                VideoId: videoId,
              },
            }),
          );
        }
      }
    },
  );

  app.post(
    "/libraries/:libraryId/videos/:videoId/source/fetch",
    {
      schema: {
        operationId: "fetchVideoSource",
        tags,
        summary: "Set a video's source from a URL (downloaded in the background)",
        description: `The server downloads the http(s) URL (redirects followed, every hop must reach a public address; at most ${config.limits.videoSourceBytes} bytes) and then processes it like an uploaded source. Answers 202 with the import; follow it with GET on this path, the video's status and its webhook events. A new fetch replaces an unfinished one.`,
        security,
        params: VideoParams,
        body: FetchBody,
        response: { ...mediaErrorResponses, 202: Envelope(ImportState) },
      },
    },
    async (request, reply) => {
      const { libraryId, videoId } = request.params;
      const result = await uploads.imports.request(
        request.auth.organizationId,
        libraryId,
        videoId,
        request.body.url,
      );
      switch (result.outcome) {
        case "accepted":
          return reply.code(202).send(ok("Video fetch accepted", result.import));
        case "not_found":
          throw ApiError.notFound();
        case "invalid":
          throw ApiError.validation(result.errors);
      }
    },
  );

  app.get(
    "/libraries/:libraryId/videos/:videoId/source/fetch",
    {
      schema: {
        operationId: "getVideoSourceFetch",
        tags,
        summary: "Progress of a video's latest import from a URL, with the reason of a failure",
        security,
        params: VideoParams,
        response: { ...mediaErrorResponses, 200: Envelope(ImportState) },
      },
    },
    async (request) => {
      const { libraryId, videoId } = request.params;
      const found = await uploads.imports.find(request.auth.organizationId, libraryId, videoId);
      if (!found) throw ApiError.notFound();
      // A signed download URL's signature or token is a credential a read-only key is not shown.
      return ok("Video fetch retrieved successfully", { ...found, url: urlShownTo(request.auth, found.url) });
    },
  );
};

/** Who is calling the tus endpoint: an organization's API key, or a signature for one video. */
type Caller =
  | { kind: "key"; organizationId: string }
  | { kind: "signed"; libraryId: string; videoId: string };

const header = (request: FastifyRequest, name: string): string | undefined => {
  const value = request.headers[name];
  return (Array.isArray(value) ? value[0] : value)?.trim() || undefined;
};

const TusHeaders = Type.Object({
  "tus-resumable": Type.Optional(Type.String({ description: "1.0.0 (required by the protocol)" })),
  authorizationsignature: Type.Optional(Type.String({ description: "From an upload authorization" })),
  authorizationexpire: Type.Optional(Type.String()),
  libraryid: Type.Optional(Type.String()),
  videoid: Type.Optional(Type.String()),
});
const TusCreateHeaders = Type.Object({
  ...TusHeaders.properties,
  "upload-length": Type.Optional(Type.String({ description: "Total bytes (or Upload-Defer-Length: 1)" })),
  "upload-metadata": Type.Optional(
    Type.String({
      description:
        "tus metadata; `library_id` and `video_id` name the video for API-key uploads (a signed upload's video is the signed one)",
    }),
  ),
});
const UploadIdParams = Type.Object({ uploadId: Type.String({ maxLength: 200 }) });
const TUS_VERSION = "1.0.0";
/** A PATCH's media type, in any case and with any parameters (RFC 9110 §8.3.1). */
const OFFSET_STREAM = /^\s*application\/offset\+octet-stream\s*(;|$)/i;
/**
 * A tus length or offset: decimal digits without leading zeros (the tus server answered "0100" in
 * plain text), within what a byte count can be.
 */
const isByteCount = (text: string): boolean =>
  /^(0|[1-9]\d*)$/.test(text) && Number.isSafeInteger(Number(text));

/**
 * The tus headers' values, checked before the tus server sees them, so that a refusal says which header
 * is wrong in the API's error body (the tus server answers plain text, and a missing Upload-Offset 403).
 * `record` is the upload a PATCH continues.
 */
function tusHeaderErrors(request: FastifyRequest, record?: VideoUploadRow): FieldError[] {
  const errors: FieldError[] = [];
  const length = header(request, "upload-length");
  const deferred = header(request, "upload-defer-length");
  const offset = header(request, "upload-offset");
  const refuse = (field: string, code: FieldError["code"], message: string) =>
    errors.push({ field, code, message });
  if (length !== undefined && !isByteCount(length)) {
    refuse("Upload-Length", "validation_type", "The Upload-Length header must be a whole number of bytes.");
  } else if (length !== undefined && Number(length) < 1) {
    refuse("Upload-Length", "validation_min", "The Upload-Length header must be at least 1 byte.");
  }
  if (deferred !== undefined && deferred !== "1") {
    refuse("Upload-Defer-Length", "validation_enum", "The Upload-Defer-Length header must be 1.");
  }
  if (request.method === "POST") {
    if (length === undefined && deferred === undefined) {
      refuse(
        "Upload-Length",
        "validation_required",
        "Upload-Length (or Upload-Defer-Length: 1) is required.",
      );
    } else if (length !== undefined && deferred !== undefined) {
      refuse(
        "Upload-Defer-Length",
        "validation_format",
        "Upload-Defer-Length must be left out when Upload-Length is given.",
      );
    }
  }
  if (request.method === "PATCH") {
    if (offset === undefined) {
      refuse("Upload-Offset", "validation_required", "The Upload-Offset header is required.");
    } else if (!isByteCount(offset)) {
      refuse("Upload-Offset", "validation_type", "The Upload-Offset header must be a whole number of bytes.");
    }
    if (length !== undefined && record?.size_bytes !== null) {
      refuse(
        "Upload-Length",
        "validation_format",
        "The upload's length is set already; leave Upload-Length out.",
      );
    } else if (
      length !== undefined &&
      offset !== undefined &&
      isByteCount(length) &&
      Number(length) < Number(offset)
    ) {
      // A deferred length below the bytes already sent: the tus server said the header was missing.
      refuse(
        "Upload-Length",
        "validation_min",
        "The Upload-Length header must be at least the Upload-Offset.",
      );
    }
  }
  return errors;
}
/** The `Upload-Metadata` values (of a header that parsed) whose bytes are not UTF-8 text. */
function notUtf8Errors(sent: string | undefined): FieldError[] {
  return (sent ?? "")
    .split(",")
    .map((pair) => pair.split(" "))
    .filter(([, value]) => value !== undefined && !isUtf8(Buffer.from(value, "base64")))
    .map(([key]) => ({
      field: `Upload-Metadata.${key}`,
      code: "validation_format" as const,
      message: `The Upload-Metadata.${key} value must be base64 of UTF-8 text.`,
    }));
}
const noBody = (description: string) => Type.Null({ description });
/**
 * tus refuses some requests itself, in plain text as the protocol defines (an offset conflict, an
 * expired upload, bytes past the length); the API's own refusals of the same statuses are JSON.
 */
const TUS_TEXT_STATUSES = [400, 404, 409, 410, 413] as const;
const tusErrorResponses = {
  ...mediaErrorResponses,
  412: MediaError,
  ...Object.fromEntries(
    TUS_TEXT_STATUSES.map((status) => [
      status,
      {
        description: "The API's error body, or tus's plain-text reason",
        content: { "application/json": { schema: MediaError }, "text/plain": { schema: Type.String() } },
      },
    ]),
  ),
};
const EXPOSED =
  "Upload-Offset, Upload-Length, Upload-Metadata, Upload-Expires, Location, Tus-Version, Tus-Resumable, Tus-Max-Size, Tus-Extension";

/**
 * The tus 1.0 endpoint (`@tus/server`). Fastify authenticates and checks the upload's binding (so
 * refusals use the contract's error bodies), then hands the raw request to the tus server; the
 * PATCH body is never parsed or buffered here.
 */
const tusRoutes: FastifyPluginAsyncTypebox<UploadRouteOptions> = async (app, options) => {
  const { uploads, identity } = options;
  const callers = new WeakMap<FastifyRequest, Caller>();

  // No body is read here: upload bytes stay in the request stream for the tus server, and a body of
  // any other type is refused by its type (415), not parsed first (malformed JSON was a 400).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", (_request, _payload, done) => done(null));
  app.addHook("onRequest", async (request, reply) => {
    request.apiGroup = "media";
    if (request.method === "OPTIONS") return;
    const caller = await authenticate(request);
    callers.set(request, caller);
    const contentType = request.headers["content-type"] ?? "";
    // The tus server takes the media type only as written in its own case, without parameters, and
    // reads it from the raw header lines.
    if (OFFSET_STREAM.test(contentType)) {
      const lines = request.raw.rawHeaders;
      for (let name = 0; name < lines.length; name += 2) {
        if (lines[name]?.toLowerCase() === "content-type")
          lines[name + 1] = "application/offset+octet-stream";
      }
      // Bytes of a PATCH or of a creation with upload count against the caller's concurrent uploads,
      // as a one-request upload does; a signed upload against its video's.
      const key = caller.kind === "key" ? uploadSlotKey(request) : `signed:${caller.videoId}`;
      if (key !== undefined) holdUploadSlot(app.uploadSlots, key, reply);
    }
  });
  app.addHook("onSend", async (request, reply) => {
    // Our own refusals must be readable by a browser on another origin, as the tus answers are, and
    // carry the protocol's headers (tus 1.0: Tus-Resumable on every answer but OPTIONS', Tus-Version on 412).
    reply.header("access-control-allow-origin", "*");
    reply.header("access-control-expose-headers", EXPOSED);
    if (request.method !== "OPTIONS") reply.header("tus-resumable", TUS_VERSION);
    if (reply.statusCode === 412) reply.header("tus-version", TUS_VERSION);
    if (!request.raw.complete) {
      reply.header("connection", "close");
      request.raw.resume();
    }
  });

  async function authenticate(request: FastifyRequest): Promise<Caller> {
    const signature = header(request, "authorizationsignature");
    if (signature) {
      const expires = header(request, "authorizationexpire");
      const libraryId = header(request, "libraryid")?.toLowerCase();
      const videoId = header(request, "videoid")?.toLowerCase();
      if (!expires || !libraryId || !videoId) {
        throw ApiError.unauthorized(
          "A signed upload needs AuthorizationSignature, AuthorizationExpire, LibraryId and VideoId headers",
        );
      }
      // A key sent beside it must be valid too: the request runs on every credential it presents.
      if (presentedKey(request, "media")) await authenticateRequest(request, "media", identity);
      const check = await uploads.authorizations.check(libraryId, videoId, signature, expires);
      if (check === "expired") throw ApiError.unauthorized("The upload authorization has expired");
      if (check === "revoked") {
        throw ApiError.unauthorized(
          "The upload authorization's issuer is no longer valid (its API key was revoked, or its user removed)",
        );
      }
      if (check !== "valid") throw ApiError.unauthorized("Invalid upload authorization");
      return { kind: "signed", libraryId, videoId };
    }
    // A key or the console's session, with the refusals of every media route.
    const auth = await authenticateRequest(request, "media", identity);
    request.auth = auth;
    return { kind: "key", organizationId: auth.organizationId };
  }

  const callerOf = (request: FastifyRequest): Caller => {
    const caller = callers.get(request);
    if (!caller) throw ApiError.unauthorized("Invalid authentication credentials");
    return caller;
  };

  const mayUse = (caller: Caller, record: VideoUploadRow): boolean =>
    caller.kind === "key"
      ? record.organization_id === caller.organizationId
      : record.library_id === caller.libraryId && record.video_id === caller.videoId;

  function requireTusVersion(request: FastifyRequest): void {
    const version = header(request, "tus-resumable");
    if (!version) throw new ApiError(412, `The Tus-Resumable header is required (tus ${TUS_VERSION})`);
    if (version !== TUS_VERSION) {
      throw new ApiError(412, `This server speaks tus ${TUS_VERSION} only`);
    }
  }

  function requireValidTusHeaders(request: FastifyRequest, record?: VideoUploadRow): void {
    const errors = tusHeaderErrors(request, record);
    if (errors.length > 0) throw ApiError.validation(errors);
  }

  /** The video a creation request is for: the signed one, or the one its metadata names. */
  async function bindingFor(request: FastifyRequest, caller: Caller): Promise<UploadBinding> {
    let metadata: Record<string, string | null> = {};
    const sent = header(request, "upload-metadata");
    try {
      if (sent) metadata = Metadata.parse(sent);
    } catch {
      throw ApiError.field(
        "Upload-Metadata",
        "validation_format",
        "The Upload-Metadata header must be comma-separated pairs of a unique key and a base64 value.",
      );
    }
    // Kept with the upload: refused as any request's text is when no store could keep it as sent,
    // and so are bytes that are not UTF-8, which the parser reads as U+FFFD.
    const unstorable = [...unstorableTextErrors(metadata, "Upload-Metadata"), ...notUtf8Errors(sent)];
    if (unstorable.length > 0) throw ApiError.validation(unstorable);
    const named = {
      libraryId: metadata.library_id?.toLowerCase(),
      videoId: metadata.video_id?.toLowerCase(),
    };
    let target: { libraryId: string; videoId: string };
    if (caller.kind === "signed") {
      const other =
        (named.libraryId && named.libraryId !== caller.libraryId) ||
        (named.videoId && named.videoId !== caller.videoId);
      if (other) throw ApiError.forbidden("The upload authorization is for another video");
      target = caller;
    } else {
      const missing = (["library_id", "video_id"] as const).filter((name) => !metadata[name]);
      if (missing.length > 0) {
        throw ApiError.validation(
          missing.map((field) => ({
            field,
            code: "validation_required" as const,
            message: `Upload-Metadata must name the ${field}.`,
          })),
        );
      }
      target = { libraryId: named.libraryId ?? "", videoId: named.videoId ?? "" };
    }
    if (!isUuid(target.libraryId) || !isUuid(target.videoId)) throw ApiError.notFound();
    const binding = await uploads.resumable.bindingFor(
      target.libraryId,
      target.videoId,
      caller.kind === "key" ? caller.organizationId : undefined,
    );
    if (!binding) throw ApiError.notFound();
    return binding;
  }

  async function handOver(
    request: FastifyRequest,
    reply: FastifyReply,
    authorized?: { binding?: UploadBinding; uploadId?: string },
  ) {
    reply.hijack();
    // What every API answer carries (src/app.ts), which a hijacked reply does not get from Fastify.
    reply.raw.setHeader("x-request-id", request.id);
    reply.raw.setHeader("cache-control", "no-store");
    await uploads.resumable.handle(request.raw, reply.raw, authorized);
  }

  const optionsSchema = (url: string) => ({
    operationId: url === "" ? "tusCapabilities" : "tusUploadCapabilities",
    tags,
    summary: "tus capabilities and CORS preflight (no authentication)",
    response: { 204: noBody("Tus-Version, Tus-Extension, Tus-Max-Size and CORS headers") },
  });
  for (const url of ["", "/:uploadId"]) {
    app.options(url, { schema: optionsSchema(url) }, (request, reply) => handOver(request, reply));
  }

  app.post(
    "",
    {
      schema: {
        operationId: "createResumableUpload",
        tags,
        summary: "Create a resumable upload of a video's source (tus 1.0 creation)",
        description: `tus creation (with \`creation-with-upload\` and \`creation-defer-length\`). Authenticated by the API key (the video named by \`library_id\` and \`video_id\` in Upload-Metadata) or by an upload authorization's headers. \`Upload-Length\` at most ${options.config.limits.videoSourceBytes} bytes (413 beyond). Answers 201 with \`Location\` (the upload URL, relative to this endpoint). When the last byte arrives the video is processed as after a one-request upload. tus's own answers (409, 410, 413...) have plain-text bodies as the protocol defines; authentication, binding, version (412) and header refusals use the API's error bodies.`,
        security: [...security, { uploadSignature: [] }],
        headers: TusCreateHeaders,
        response: {
          ...tusErrorResponses,
          201: {
            ...noBody("Created; `Location` is the upload URL"),
            headers: {
              location: { type: "string", description: "The upload's URL, relative to this endpoint" },
              "upload-offset": { type: "integer", description: "Bytes received (creation-with-upload)" },
            },
          },
        },
      },
    },
    async (request, reply) => {
      const caller = callerOf(request);
      requireTusVersion(request);
      requireValidTusHeaders(request);
      // Bytes past the declared length would be refused after the upload was created, leaving it behind.
      const length = header(request, "upload-length");
      const sending = header(request, "content-length");
      const hasBody =
        (sending !== undefined && sending !== "0") || request.headers["transfer-encoding"] !== undefined;
      // A creation's only body is its first bytes (creation-with-upload).
      if (hasBody && !OFFSET_STREAM.test(request.headers["content-type"] ?? "")) {
        throw ApiError.unsupportedMediaType();
      }
      if (length !== undefined && sending !== undefined && Number(sending) > Number(length)) {
        throw ApiError.payloadTooLarge();
      }
      const binding = await bindingFor(request, caller);
      actingOrganization.set(request, binding.organizationId);
      await handOver(request, reply, { binding });
    },
  );

  type UploadMethod = "HEAD" | "PATCH" | "DELETE";
  const uploadHandler =
    (method: UploadMethod) =>
    async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
      const caller = callerOf(request);
      requireTusVersion(request);
      const { uploadId } = request.params as { uploadId: string };
      const record = await uploads.resumable.find(uploadId);
      // Another organization's or another video's upload does not exist for the caller.
      if (!record || !mayUse(caller, record)) throw ApiError.notFound();
      // After the ownership check: another organization's upload is 404 whatever the request holds.
      if (method === "PATCH" && !OFFSET_STREAM.test(request.headers["content-type"] ?? "")) {
        throw ApiError.unsupportedMediaType();
      }
      requireValidTusHeaders(request, record);
      if (method === "PATCH" && record.completed_at) throw ApiError.conflict("The upload is complete");
      if (method === "HEAD") await uploads.resumable.finishStranded(record);
      actingOrganization.set(request, record.organization_id);
      await handOver(request, reply, { uploadId: record.id });
    };
  const uploadRoute = (method: UploadMethod, schema: Record<string, unknown>) =>
    app.route({
      method,
      url: "/:uploadId",
      // tus clients resume with HEAD; the document leaves HEAD routes out unless told.
      config: { swagger: { exposeHeadRoute: method === "HEAD" } },
      schema: {
        tags,
        security: [...security, { uploadSignature: [] }],
        headers: TusHeaders,
        params: UploadIdParams,
        ...schema,
      },
      handler: uploadHandler(method),
    });
  // tus's method override, for clients behind proxies that drop PATCH (tus-js-client's
  // `overridePatchMethod`): a POST naming the method it stands for, in `X-HTTP-Method-Override`.
  app.post(
    "/:uploadId",
    {
      schema: {
        operationId: "overriddenResumableUploadMethod",
        tags,
        summary: "A tus PATCH, HEAD or DELETE sent as POST with X-HTTP-Method-Override",
        security: [...security, { uploadSignature: [] }],
        headers: TusHeaders,
        params: UploadIdParams,
        response: { ...tusErrorResponses, 200: noBody("As HEAD"), 204: noBody("As PATCH or DELETE") },
      },
    },
    async (request, reply) => {
      const method = header(request, "x-http-method-override")?.toUpperCase();
      if (method !== "PATCH" && method !== "HEAD" && method !== "DELETE") throw ApiError.notFound();
      // The tus server reads the method from the raw request.
      request.raw.method = method;
      await uploadHandler(method)(request, reply);
    },
  );
  uploadRoute("HEAD", {
    operationId: "getResumableUploadOffset",
    summary: "Offset of a resumable upload (tus HEAD)",
    description: "`Upload-Offset` is how many bytes the server has; resume with PATCH from there.",
    response: { ...tusErrorResponses, 200: noBody("Upload-Offset, Upload-Length, Upload-Metadata") },
  });
  uploadRoute("PATCH", {
    operationId: "continueResumableUpload",
    summary: "Send the next bytes of a resumable upload (tus PATCH)",
    description:
      "Body: bytes from `Upload-Offset`, `Content-Type: application/offset+octet-stream`. Answers 204 with the new `Upload-Offset`; 409 (plain text, tus) when the offset is not the server's.",
    response: { ...tusErrorResponses, 204: noBody("The new Upload-Offset") },
  });
  uploadRoute("DELETE", {
    operationId: "terminateResumableUpload",
    summary: "Abandon a resumable upload and delete its bytes (tus termination)",
    response: { ...tusErrorResponses, 204: noBody("Terminated") },
  });
};

/** Resumable (tus) uploads, signed browser upload authorizations and URL imports, under `/v1/media`. */
export const uploadRoutes: FastifyPluginAsyncTypebox<UploadRouteOptions> = async (app, options) => {
  // Only the services go on: the parent's own `prefix` option would be applied twice.
  const { uploads, identity, config } = options;
  await app.register(sourceRoutes, { uploads, identity, config });
  await app.register(tusRoutes, { uploads, identity, config, prefix: TUS_PATH.slice("/v1/media".length) });
};
