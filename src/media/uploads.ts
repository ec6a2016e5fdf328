import type { Readable } from "node:stream";
import type { Multipart } from "@fastify/multipart";
import type { FastifyRequest } from "fastify";
import { type BlobStore, BlobTooLargeError } from "../blobs/store.ts";
import { ApiError } from "../http/errors.ts";
import { nulCharacterErrors } from "../http/validation.ts";

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

const MAX_FIELD_BYTES = 64 * 1024;

const isFileSystemError = (error: unknown): boolean =>
  typeof error === "object" && error !== null && "syscall" in error;

/**
 * Reads a multipart request: text fields, and the one file part named `fileField`, streamed into
 * the blob store under `key` with the size limit enforced while it arrives (413 past it). Other
 * file parts are skipped. A request that is not multipart is 415; a malformed one 400.
 */
export async function receiveMultipart(
  request: FastifyRequest,
  blobs: BlobStore,
  options: { fileField: string; maxBytes: number; key: () => string },
): Promise<ReceivedForm> {
  if (!request.isMultipart()) throw ApiError.unsupportedMediaType();
  const fields: Record<string, string> = {};
  let file: ReceivedFile | undefined;
  try {
    const parts = request.parts({
      // One byte over the limit lets our own counter see the overflow and answer 413.
      limits: { fileSize: options.maxBytes + 1, files: 5, fields: 20, fieldSize: MAX_FIELD_BYTES },
    });
    for await (const part of parts as AsyncIterableIterator<Multipart>) {
      if (part.type === "field") {
        if (!(part.fieldname in fields)) fields[part.fieldname] = String(part.value ?? "");
        continue;
      }
      if (part.fieldname !== options.fileField || file) {
        await drain(part.file);
        continue;
      }
      const key = options.key();
      const stored = await blobs.put(key, part.file, { maxBytes: options.maxBytes });
      file = { key, filename: part.filename ?? "", sizeBytes: stored.sizeBytes };
      if ((part.file as Readable & { truncated?: boolean }).truncated) throw ApiError.payloadTooLarge();
    }
    const nulErrors = nulCharacterErrors(fields);
    if (nulErrors.length > 0) throw ApiError.validation(nulErrors);
  } catch (error) {
    if (file) await blobs.delete(file.key);
    throw toUploadError(error);
  }
  return { fields, file };
}

function toUploadError(error: unknown): unknown {
  if (error instanceof ApiError) return error;
  if (error instanceof BlobTooLargeError) return ApiError.payloadTooLarge();
  if (isFileSystemError(error)) return error;
  const status = (error as { statusCode?: number }).statusCode;
  if (status === 413) return ApiError.payloadTooLarge();
  if (status === 415 || status === 406) return ApiError.unsupportedMediaType();
  // Anything else busboy complains about is a malformed body.
  return ApiError.invalidRequest();
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
