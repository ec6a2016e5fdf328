import { createHash } from "node:crypto";
import { promisify } from "node:util";
import { brotliCompress, constants, gzip } from "node:zlib";
import negotiate from "@fastify/accept-negotiator";
import type { FastifyReply, FastifyRequest } from "fastify";
import fresh from "fresh";

const brotliAsync = promisify(brotliCompress);
const gzipAsync = promisify(gzip);

const CODINGS = ["br", "gzip", "identity"] as const;
type Coding = (typeof CODINGS)[number];

interface Encoded {
  hash: string;
  bodies: Record<Coding, Buffer>;
}

async function encodeAll(body: string | Buffer): Promise<Encoded> {
  const identity = Buffer.from(body);
  const [br, gzipped] = await Promise.all([
    // Brotli's quality 4 compresses the reference's 3.3 MB script about as well as gzip in 60 ms;
    // its default (11) took 7 s.
    brotliAsync(identity, { params: { [constants.BROTLI_PARAM_QUALITY]: 4 } }),
    gzipAsync(identity),
  ]);
  const hash = createHash("sha256").update(identity).digest("base64url").slice(0, 22);
  return { hash, bodies: { br, gzip: gzipped, identity } };
}

/**
 * A large answer that stays the same while the process runs (the OpenAPI document, the API
 * reference's script), compressed once off the event loop and sent in the coding the request
 * accepts, with an `ETag` so that a browser's second visit costs a 304. Compressing the 3.3 MB
 * script on every request would cost 55-70 ms of CPU on a route that is not rate limited.
 */
export class CompressedOnce {
  #source: string | Buffer | undefined;
  #encoded: Promise<Encoded> | undefined;

  /** `body` in the coding `request` accepts (headers set on `reply`), or null for a 304. */
  async encode(request: FastifyRequest, reply: FastifyReply, body: string | Buffer): Promise<Buffer | null> {
    if (body !== this.#source || !this.#encoded) {
      this.#source = body;
      this.#encoded = encodeAll(body);
    }
    const { hash, bodies } = await this.#encoded;
    // No Accept-Encoding, or none acceptable: the body as it is.
    const coding: Coding = negotiate(request.headers["accept-encoding"] ?? "", [...CODINGS]) ?? "identity";
    // One tag per representation: a cache holding the gzip body must not revalidate it as the brotli one.
    const etag = coding === "identity" ? `"${hash}"` : `"${hash}-${coding}"`;
    reply.header("vary", "accept-encoding").header("etag", etag).header("cache-control", "no-cache");
    if (coding !== "identity") reply.header("content-encoding", coding);
    if (fresh(request.headers, { etag })) {
      reply.code(304);
      return null;
    }
    return bodies[coding];
  }
}
