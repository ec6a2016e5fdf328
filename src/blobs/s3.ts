import { PassThrough, pipeline, type Readable } from "node:stream";
import type { S3Client } from "@aws-sdk/client-s3";
import type { S3BlobSettings } from "../config.ts";
import { CONNECTION_FAILURE_CODES } from "../net/connection-failures.ts";
import { SizeLimit } from "./size-limit.ts";
import {
  assertBlobKey,
  type BlobStore,
  BlobStoreRefusedError,
  BlobStoreUnavailableError,
  type StoredBlob,
} from "./store.ts";

type Sdk = typeof import("@aws-sdk/client-s3");
type Storage = typeof import("@aws-sdk/lib-storage");

/** The SDK takes most of a second to load: only processes that use the S3 store load it. */
const loadSdk = (): Promise<[Sdk, Storage]> =>
  Promise.all([import("@aws-sdk/client-s3"), import("@aws-sdk/lib-storage")]);

/**
 * Multipart upload parts (S3 wants at least 5 MiB; at most 10,000 parts make 80 GB), at most 4 in
 * flight: an upload holds up to 32 MiB in memory, whatever the video's size.
 */
const PART_BYTES = 8 * 1024 * 1024;
const UPLOAD_QUEUE = 4;

/** The HTTP status of an S3 service error (the SDK's `S3ServiceException`), if it is one. */
const statusOf = (error: unknown): number | undefined =>
  (error as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;

/**
 * The service is away or failing for now (no answer, a 5xx, throttling), as opposed to refusing the
 * node's settings (a 4xx: credentials, bucket, region). A misspelt endpoint's name resolves to
 * nothing, as one whose resolver is away does: it shows in the start-up warning, which names the host.
 */
const isOutage = (error: unknown): boolean => {
  const status = statusOf(error);
  if (status !== undefined) return status >= 500 || status === 429 || status === 408;
  return CONNECTION_FAILURE_CODES.has((error as NodeJS.ErrnoException | undefined)?.code ?? "");
};

/** What S3 answered, for a log or a job's last error: `AccessDenied (HTTP 403)`. */
const answerOf = (error: unknown): string => `${(error as Error).name} (HTTP ${statusOf(error)})`;

/**
 * Any failure of a request to the bucket is the store's, not the caller's. An answer that is no
 * outage (403 AccessDenied, 404 NoSuchBucket, InvalidAccessKeyId, SignatureDoesNotMatch, a wrong
 * region) is a refusal: trying again does not help until the settings or permissions are fixed.
 */
const storeError = (error: unknown): BlobStoreUnavailableError => {
  if (error instanceof BlobStoreUnavailableError) return error;
  if (statusOf(error) === undefined || isOutage(error)) return new BlobStoreUnavailableError(error);
  return new BlobStoreRefusedError(error, answerOf(error));
};

const storeFailed = (error: unknown): never => {
  throw storeError(error);
};

/** Codes of keys DeleteObjects reports as not deleted that say the service is failing, not refusing. */
const KEY_OUTAGE_CODES = new Set(["InternalError", "ServiceUnavailable", "SlowDown"]);

/**
 * Blobs as objects of one S3 bucket (AWS or any S3-compatible service), keyed by the blob key itself,
 * so every API, worker and edge node reads and writes the same files. A put streams through
 * `lib-storage` (multipart above one part), which makes the object visible only once complete.
 */
export class S3BlobStore implements BlobStore {
  readonly #bucket: string;
  readonly #settings: S3BlobSettings;
  #connection: Promise<{ sdk: Sdk; storage: Storage; client: S3Client }> | undefined;

  constructor(settings: S3BlobSettings) {
    this.#bucket = settings.bucket;
    this.#settings = settings;
  }

  /** The SDK and a client, loaded on first use (a CLI command that touches no blob never loads them). */
  get #sdk(): Promise<{ sdk: Sdk; storage: Storage; client: S3Client }> {
    const settings = this.#settings;
    this.#connection ??= loadSdk().then(([sdk, storage]) => ({
      sdk,
      storage,
      client: new sdk.S3Client({
        region: settings.region,
        forcePathStyle: settings.forcePathStyle,
        ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
        ...(settings.credentials ? { credentials: settings.credentials } : {}),
        // The SDK waits for ever by default: a bucket that stops answering held uploads, playback,
        // the worker's jobs, shutdown and start-up until it came back. `requestTimeout` bounds each
        // wait for the answer or its next bytes, not a long transfer that keeps moving.
        requestHandler: {
          connectionTimeout: settings.timeoutMs,
          requestTimeout: settings.timeoutMs,
          throwOnRequestTimeout: true,
        },
        // Checksums only where S3 requires them: many S3-compatible servers reject the newer
        // `aws-chunked` trailing checksums, and ranged reads cannot be checked against a whole-object sum.
        requestChecksumCalculation: "WHEN_REQUIRED",
        responseChecksumValidation: "WHEN_REQUIRED",
      }),
    }));
    return this.#connection;
  }

  /**
   * The bucket must accept these settings, so a misconfigured node stops at start instead of failing
   * uploads. A service that is down or failing says nothing about the settings: that is an outage.
   */
  async ready(): Promise<void> {
    const { sdk, client } = await this.#sdk;
    try {
      await client.send(new sdk.HeadBucketCommand({ Bucket: this.#bucket }));
    } catch (error) {
      if (isOutage(error)) throw new BlobStoreUnavailableError(error);
      const reason = statusOf(error) === undefined ? (error as Error).message : answerOf(error);
      throw new Error(`cannot reach S3 bucket "${this.#bucket}" (CUMULO_S3_*): ${reason}`);
    }
  }

  async put(key: string, body: Readable, options: { maxBytes: number }): Promise<StoredBlob> {
    assertBlobKey(key);
    // The body may fail while the SDK loads, before `pipeline` listens: an error event nobody
    // listens to ends the process. `pipeline` still sees the stream's error and rejects.
    let sourceFailed = false;
    body.on("error", () => {
      sourceFailed = true;
    });
    const { storage, client } = await this.#sdk;
    const limit = new SizeLimit(options.maxBytes);
    // A source error or the size limit destroys `limit`, which fails the upload and aborts its parts.
    const limited = pipeline(body, limit, () => undefined);
    const upload = new storage.Upload({
      client,
      params: { Bucket: this.#bucket, Key: key, Body: limited },
      partSize: PART_BYTES,
      queueSize: UPLOAD_QUEUE,
      leavePartsOnError: false,
    });
    try {
      await upload.done();
    } catch (error) {
      body.destroy();
      if (limit.exceeded) throw limit.exceeded;
      throw sourceFailed ? error : storeError(error);
    }
    return { key, sizeBytes: limit.bytes };
  }

  open(key: string, range?: { start: number; end: number }): Readable {
    assertBlobKey(key);
    const out = new PassThrough();
    const aborter = new AbortController();
    // The reader leaving early (a viewer who closed the connection) ends the request to S3 too.
    out.once("close", () => aborter.abort());
    this.#sdk
      .then(({ sdk, client }) =>
        client.send(
          new sdk.GetObjectCommand({
            Bucket: this.#bucket,
            Key: key,
            ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}),
          }),
          { abortSignal: aborter.signal },
        ),
      )
      .then((answer) => {
        pipeline(answer.Body as Readable, out, () => undefined);
      })
      .catch((error: unknown) => out.destroy(statusOf(error) === 404 ? (error as Error) : storeError(error)));
    return out;
  }

  async stat(key: string): Promise<{ sizeBytes: number; modifiedAt: Date } | undefined> {
    assertBlobKey(key);
    const { sdk, client } = await this.#sdk;
    try {
      const head = await client.send(new sdk.HeadObjectCommand({ Bucket: this.#bucket, Key: key }));
      return { sizeBytes: head.ContentLength ?? 0, modifiedAt: head.LastModified ?? new Date(0) };
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw storeError(error);
    }
  }

  async exists(key: string): Promise<boolean> {
    return (await this.stat(key)) !== undefined;
  }

  async delete(key: string): Promise<void> {
    assertBlobKey(key);
    const { sdk, client } = await this.#sdk;
    await client.send(new sdk.DeleteObjectCommand({ Bucket: this.#bucket, Key: key })).catch(storeFailed);
  }

  async deletePrefix(prefix: string): Promise<void> {
    assertBlobKey(prefix);
    await this.#deletePrefix(prefix).catch(storeFailed);
  }

  async #deletePrefix(prefix: string): Promise<void> {
    const { sdk, client } = await this.#sdk;
    // A page holds at most 1000 keys, the most one DeleteObjects call takes.
    let continuationToken: string | undefined;
    do {
      const page = await client.send(
        new sdk.ListObjectsV2Command({
          Bucket: this.#bucket,
          Prefix: `${prefix}/`,
          ...(continuationToken ? { ContinuationToken: continuationToken } : {}),
        }),
      );
      const keys = (page.Contents ?? []).flatMap((object) => (object.Key ? [{ Key: object.Key }] : []));
      if (keys.length > 0) {
        const answer = await client.send(
          new sdk.DeleteObjectsCommand({ Bucket: this.#bucket, Delete: { Objects: keys, Quiet: true } }),
        );
        // A key refused (AccessDenied: no `s3:DeleteObject` on it) comes in a 200 answer, not as its status.
        const failed = answer.Errors?.[0];
        if (failed) {
          const cause = new Error(`S3 could not delete ${failed.Key}: ${failed.Code} ${failed.Message}`);
          throw KEY_OUTAGE_CODES.has(failed.Code ?? "")
            ? new BlobStoreUnavailableError(cause)
            : new BlobStoreRefusedError(cause, `${failed.Code ?? "Unknown"} (a key of DeleteObjects)`);
        }
      }
      continuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (continuationToken);
  }
}
