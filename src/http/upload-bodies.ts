import multipart from "@fastify/multipart";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Config } from "../config.ts";
import { credentialOf } from "../identity/service.ts";
import { ApiError } from "./errors.ts";
import { sendsBody } from "./json-bodies.ts";

/** Bodies a handler streams to storage itself, rather than ones parsed before it runs. */
const STREAMED_BODY = /^\s*(multipart\/|application\/octet-stream\b|video\/)/i;

/** Files in one multipart body: every upload operation takes one file; the rest are skipped. */
const MAX_FILE_PARTS = 5;

/**
 * How many streamed uploads each API key has in progress on this node. An upload holds a
 * connection, a file handle and a temporary file for as long as the client takes to send it.
 */
export class UploadSlots {
  readonly #inProgress = new Map<string, number>();

  constructor(private readonly perKey: number) {}

  /** Takes a slot for the key, or answers false when it already holds as many as it may. */
  take(key: string): boolean {
    const held = this.#inProgress.get(key) ?? 0;
    if (held >= this.perKey) return false;
    this.#inProgress.set(key, held + 1);
    return true;
  }

  release(key: string): void {
    const held = (this.#inProgress.get(key) ?? 1) - 1;
    if (held <= 0) this.#inProgress.delete(key);
    else this.#inProgress.set(key, held);
  }
}

declare module "fastify" {
  interface FastifyInstance {
    uploadSlots: UploadSlots;
  }
}

/** One count per node, shared by every upload route (called once on the root app). */
export function registerUploadSlots(app: FastifyInstance, perKey: number): void {
  app.decorate("uploadSlots", new UploadSlots(perKey));
}

const tooManyUploads = () =>
  new ApiError(429, "Too many requests", { error: "rate_limited", headers: { "retry-after": "1" } });

/** The API key (or console session) a request's upload counts against, when it has one. */
export function uploadSlotKey(request: FastifyRequest): string | undefined {
  return request.auth ? `${request.auth.organizationId}:${credentialOf(request.auth)}` : undefined;
}

/** Holds one of `key`'s upload slots until the answer closes: 429 when it holds them all already. */
export function holdUploadSlot(slots: UploadSlots, key: string, reply: FastifyReply): void {
  if (!slots.take(key)) throw tooManyUploads();
  reply.raw.once("close", () => slots.release(key));
}

/**
 * Makes the routes of `app` (an encapsulated plugin) take uploads: multipart bodies within the
 * configured limits on parts, fields and part headers, and at most `maxConcurrentUploads` streamed
 * uploads per API key at once (429 past it, counted across every upload route of this node,
 * `registerUploadSlots`).
 * An answer given before the body was read (404, 413, 429...) closes the connection, the rest of the
 * body being discarded as it arrives, so nothing waits on it.
 */
export async function acceptUploads(app: FastifyInstance, config: Config): Promise<void> {
  const { multipart: limits } = config.limits;
  await app.register(multipart, {
    limits: {
      parts: limits.parts,
      fields: limits.fields,
      fieldSize: limits.fieldBytes,
      headerPairs: limits.partHeaders,
      files: MAX_FILE_PARTS,
    },
  });
  const { uploadSlots } = app;
  app.addHook("onRequest", async (request, reply) => {
    const key = uploadSlotKey(request);
    if (key === undefined || !STREAMED_BODY.test(request.headers["content-type"] ?? "")) return;
    holdUploadSlot(uploadSlots, key, reply);
  });
  // Every write here takes a file: a body of another type is 415 before any parser reads it. Left
  // to the JSON parser, a video sent as `application/json` was 400 (unparsable) or 413 (over the JSON
  // limit), and only JSON that parsed got its 415 (QA of 4 December).
  app.addHook("preParsing", (request, _reply, payload, done) => {
    const writes = request.method === "POST" || request.method === "PUT" || request.method === "PATCH";
    if (writes && sendsBody(request) && !STREAMED_BODY.test(request.headers["content-type"] ?? "")) {
      return done(ApiError.unsupportedMediaType());
    }
    done(null, payload);
  });
  app.addHook("onSend", async (request, reply) => {
    const raw = request.raw;
    if (!raw.complete) {
      reply.header("connection", "close");
      raw.resume();
    }
  });
}
