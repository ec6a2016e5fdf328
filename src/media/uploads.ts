import type { IncomingMessage } from "node:http";
import { PassThrough, type Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { Multipart } from "@fastify/multipart";
import type { FastifyRequest } from "fastify";
import type { FileRemovals } from "../blobs/removals.ts";
import { type BlobStore, BlobStoreUnavailableError, BlobTooLargeError } from "../blobs/store.ts";
import { ApiError } from "../http/errors.ts";
import { sendsBody } from "../http/json-bodies.ts";
import { unstorableTextErrors } from "../http/validation.ts";

export interface ReceivedFile {
  /** Blob key the file was stored under (chosen by the server). */
  key: string;
  /** The client's file name: only ever looked at for its extension, never used in a path. */
  filename: string;
  sizeBytes: number;
}

export interface ReceivedForm {
  fields: Record<string, string>;
  file: ReceivedFile | undefined;
}

const isFileSystemError = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "syscall" in error;

/**
 * Reads a multipart request: text fields, and the one file part named `fileField`, streamed into
 * the blob store under `key` with the size limit enforced while it arrives (413 past it). Other
 * file parts are skipped. A request that is not multipart is 415; a malformed one 400. A stored file
 * of a request refused after all is removed through `removals`, durably.
 */
export async function receiveMultipart(
  request: FastifyRequest,
  { blobs, removals }: { blobs: BlobStore; removals: FileRemovals },
  options: { fileField: string; maxBytes: number; key: () => string },
): Promise<ReceivedForm> {
  if (!request.isMultipart()) {
    // No body at all is a form without fields, as a JSON operation reads it as `{}`: each required
    // field is then named (docs/decisions.md). A body of another type is 415.
    if (!sendsBody(request)) return { fields: {}, file: undefined };
    throw ApiError.unsupportedMediaType();
  }
  const fields: Record<string, string> = {};
  let file: ReceivedFile | undefined;
  try {
    // A client gone while the route was busy (looking the video up) leaves a body that will never
    // end, and no event to say so once parsing starts.
    if (clientGone(request)) throw new Error("client gone");
    // One byte over the limit lets our own counter see the overflow and answer 413. Limits on parts
    // and fields are the plugin's (acceptUploads in src/http/upload-bodies.ts).
    const parts = request.parts({ limits: { fileSize: options.maxBytes + 1 } });
    const closed = watchClosingDelimiter(request.raw, boundaryOf(request.headers["content-type"]));
    for await (const part of parts as AsyncIterableIterator<Multipart>) {
      if (part.type === "field") {
        if (part.valueTruncated) throw ApiError.payloadTooLarge();
        // A part without a name is no field any operation reads: ignored like an unknown field.
        if (part.fieldname === "") continue;
        // The file sent without a filename arrives as text (`curl -F 'file=<t.png'`): say so, rather
        // than judge its bytes as text (a PNG "must not contain NUL characters").
        if (part.fieldname === options.fileField) {
          throw ApiError.field(
            options.fileField,
            "validation_required",
            `The ${options.fileField} field must be a file: a part with a filename (curl -F '${options.fileField}=@path').`,
          );
        }
        if (!(part.fieldname in fields)) fields[part.fieldname] = String(part.value ?? "");
        continue;
      }
      const content = ownedStream(part.file);
      if (part.fieldname !== options.fileField || file) {
        await drain(content);
        continue;
      }
      const key = options.key();
      const stored = await blobs.put(key, content, { maxBytes: options.maxBytes });
      file = { key, filename: part.filename ?? "", sizeBytes: stored.sizeBytes };
      if ((part.file as Readable & { truncated?: boolean }).truncated) throw ApiError.payloadTooLarge();
    }
    // The parser takes a body that ends without its closing delimiter as complete: it is truncated.
    if (!closed()) throw malformed(options.fileField);
    const textErrors = unstorableTextErrors(fields);
    if (textErrors.length > 0) throw ApiError.validation(textErrors);
  } catch (error) {
    if (file) await removals.removeNow({ keys: [file.key] });
    if (clientGone(request)) {
      // The client's doing, not the server's: nobody is left to read the answer.
      request.log.warn({ err: error }, "client closed the connection during its upload");
      throw malformed(options.fileField);
    }
    throw toUploadError(error, options.fileField);
  }
  return { fields, file };
}

/** The client closed the connection before sending its whole body (a finished body is destroyed too). */
const clientGone = (request: FastifyRequest): boolean => request.raw.destroyed && !request.raw.complete;

/** A body the parser cannot read to its end: the file it should carry cannot be trusted. */
const malformed = (fileField: string): ApiError =>
  ApiError.field(
    fileField,
    "validation_format",
    `The ${fileField} field could not be read: the multipart body is malformed or ends before its closing boundary.`,
  );

function toUploadError(error: unknown, fileField: string): unknown {
  if (error instanceof ApiError || error instanceof BlobStoreUnavailableError) return error;
  if (error instanceof BlobTooLargeError) return ApiError.payloadTooLarge();
  if (isFileSystemError(error)) return error;
  const status = (error as { statusCode?: number }).statusCode;
  if (status === 413) return ApiError.payloadTooLarge();
  if (status === 415 || status === 406) return ApiError.unsupportedMediaType();
  // A field named after a property every object has (`constructor`), which the parser refuses
  // without naming it: the contract's bare 400, not a claim that the body was cut short.
  if ((error as { code?: string }).code === "FST_PROTO_VIOLATION") return ApiError.invalidRequest();
  // Anything else the parser complains about (a part cut short, no boundary) is a malformed body.
  return malformed(fileField);
}

/**
 * A file part's stream, taken over as soon as the part arrives. The parser reports a body that ends
 * inside the part by failing or destroying the part's stream, possibly before anyone reads it (the
 * whole body may be parsed before the part is handed over): such a part is cut short, and piping it
 * at once makes a later failure reach the reader instead of leaving it waiting for an end that never
 * comes.
 */
function ownedStream(part: Readable): Readable {
  if (part.destroyed && !part.readableEnded) throw new Error("multipart part cut short");
  const copy = new PassThrough();
  pipeline(part, copy).catch(() => undefined); // the failure reaches the reader through `copy`
  return copy;
}

const BOUNDARY = /;\s*boundary\s*=\s*(?:"([^"]+)"|([^;\s]+))/i;

function boundaryOf(contentType: string | undefined): string {
  const match = BOUNDARY.exec(contentType ?? "");
  return match?.[1] ?? match?.[2] ?? "";
}

/**
 * Watches the body go by for the multipart closing delimiter (CRLF `--boundary--`; at the very
 * start of the body without the CRLF), and tells whether it was seen.
 */
function watchClosingDelimiter(body: IncomingMessage, boundary: string): () => boolean {
  const delimiter = Buffer.from(`\r\n--${boundary}--`);
  let seen = false;
  // The body starts as if after a line break, so an empty form (`--boundary--`) counts too.
  let tail = Buffer.from("\r\n");
  const onData = (chunk: Buffer) => {
    const window = Buffer.concat([tail, chunk]);
    if (window.includes(delimiter)) {
      seen = true;
      body.off("data", onData);
      return;
    }
    tail = window.subarray(Math.max(0, window.length - delimiter.length + 1));
  };
  if (boundary !== "") body.on("data", onData);
  return () => seen;
}

async function drain(stream: Readable): Promise<void> {
  for await (const _chunk of stream) {
    // discarded
  }
}

/** Reads at most `maxBytes` from the start of a stream, then stops it. */
export async function readHead(stream: Readable, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of stream) {
    chunks.push(chunk as Buffer);
    length += (chunk as Buffer).length;
    if (length >= maxBytes) break;
  }
  stream.destroy();
  return Buffer.concat(chunks).subarray(0, maxBytes);
}
