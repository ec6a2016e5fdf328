import { randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { readdir, rm, stat } from "node:fs/promises";
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from "node:http";
import { join } from "node:path";
import { FileStore } from "@tus/file-store";
import { type KvStore, Server, Upload } from "@tus/server";
import type { FastifyBaseLogger } from "fastify";
import {
  type BlobStore,
  isStorageFailure,
  STORAGE_RETRY_AFTER_S,
  STORAGE_UNAVAILABLE_MESSAGE,
} from "../../blobs/store.ts";
import { type Clock, laterBy, nowIso } from "../../clock.ts";
import { ApiError } from "../../http/errors.ts";
import type { VideoRepository } from "../../media/video-repository.ts";
import { readJson, writeJson } from "../../store/codec.ts";
import type { Executor, Transact } from "../../store/transactions.ts";
import { isStoreUnavailable, STORE_UNAVAILABLE_MESSAGE } from "../../store/unavailable.ts";
import { sourceKey, type VideoPipeline } from "../pipeline.ts";
import type { UploadRepository } from "./repository.ts";
import type { VideoUploadRow } from "./tables.ts";

/** The one video an upload is for; fixed when the upload is created. */
export interface UploadBinding {
  organizationId: string;
  libraryId: string;
  videoId: string;
}

type TusMetadata = Record<string, string | null>;

/** Where a node keeps the bytes of its unfinished resumable uploads, one file each. */
export const uploadDirectory = (dataDir: string) => join(dataDir, "uploads");

/** How long a node's claim on moving a finished upload holds: far longer than a move takes. */
const FINISHING_LEASE_MS = 30 * 60_000;

/** A tus answer with a plain-text body, as the library renders its own errors. */
const tusError = (status_code: number, body: string) => ({ status_code, body: `${body}\n` });

/** The answer to the request that finished an upload its video did not take as its source. */
const SUPERSEDED_MESSAGE = "The video got a newer source while this upload was under way";
const REFUSALS = {
  empty: [400, "An empty file is not a video source"],
  not_found: [404, "The video no longer exists"],
  superseded: [409, SUPERSEDED_MESSAGE],
} as const;

const toUpload = (row: VideoUploadRow, offset: number) =>
  new Upload({
    id: row.id,
    size: row.size_bytes === null ? undefined : Number(row.size_bytes),
    offset,
    metadata: readJson<TusMetadata>(row.metadata) ?? {},
    creation_date: row.created_at,
  });

/**
 * tus's per-upload record, kept in the store rather than next to the file: the binding to a video
 * is written at creation (by `onUploadCreate`), the library then only records the length.
 */
class UploadRecords implements KvStore<Upload> {
  constructor(private readonly repository: UploadRepository) {}

  async get(id: string): Promise<Upload | undefined> {
    const row = await this.repository.findUpload(id);
    return row ? toUpload(row, 0) : undefined;
  }

  async set(id: string, upload: Upload): Promise<void> {
    await this.repository.updateUpload(this.repository.db, id, {
      size_bytes: upload.size ?? null,
      metadata: writeJson(upload.metadata ?? {}) ?? "{}",
    });
  }

  async delete(id: string): Promise<void> {
    await this.repository.deleteUpload(this.repository.db, id);
  }

  list(): Promise<string[]> {
    return this.repository.uploadIds();
  }
}

/** The file store, except that a finished upload (its file already moved to the blob store) still answers HEAD. */
class VideoUploadStore extends FileStore {
  constructor(
    directory: string,
    private readonly repository: UploadRepository,
    expiryMs: number,
    private readonly logger: FastifyBaseLogger,
  ) {
    super({
      directory,
      configstore: new UploadRecords(repository),
      expirationPeriodInMilliseconds: expiryMs,
    });
  }

  override async getUpload(id: string): Promise<Upload> {
    const row = await this.repository.findUpload(id);
    if (row?.completed_at && row.size_bytes !== null) return toUpload(row, Number(row.size_bytes));
    try {
      return await super.getUpload(id);
    } catch (error) {
      // The record is in the store, the bytes not on this disk: most often a balancer that sent the
      // request to another API node than the one that holds them. The client's 410 reads as expired.
      if (row && (error as { status_code?: number }).status_code === 410) {
        this.logger.warn(
          { uploadId: id },
          "resumable upload's bytes are not on this API node's disk: with several API nodes, route /v1/media/tus/{id} to the node that holds them (docs/operations.md, Media storage); after a restore, unfinished uploads are not in backups; answered 410",
        );
      }
      throw error;
    }
  }
}

export interface ResumableUploadDeps {
  dataDir: string;
  maxBytes: number;
  expiryMs: number;
  /** Unfinished uploads one video may have; a creation past it removes the oldest. */
  openPerVideo: number;
  clock: Clock;
  transact: Transact;
  blobs: BlobStore;
  repository: UploadRepository;
  videos: VideoRepository;
  pipeline: VideoPipeline;
  logger: FastifyBaseLogger;
}

/** The request an upload is created from, as the tus library hands it to its hooks. */
const nodeRequestOf = (request: unknown): IncomingMessage | undefined =>
  (request as { runtime?: { node?: { req?: IncomingMessage } } }).runtime?.node?.req;

/**
 * Resumable uploads (tus 1.0 through `@tus/server` and `@tus/file-store`) of a video's source. The
 * bytes go to `{dataDir}/uploads/{id}`; when the last one arrives the file moves into the blob store
 * and the video takes the same path as a one-request upload (`VideoPipeline.acceptSource`), whose
 * processing probes the content with ffprobe.
 */
export class ResumableUploads {
  readonly #server: Server;
  readonly #directory: string;
  readonly #bindings = new WeakMap<IncomingMessage, UploadBinding>();
  /** The upload each request on one was authorized for (by the route, from its path). */
  readonly #uploadIds = new WeakMap<IncomingMessage, string>();
  /** The upload each creation request made, removed again when the creation fails. */
  readonly #created = new WeakMap<IncomingMessage, string>();
  /** Uploads whose bytes are being moved into the blob store: one move each, however asked. */
  readonly #finishing = new Map<string, Promise<"moved" | "elsewhere">>();

  constructor(
    private readonly deps: ResumableUploadDeps,
    path: string,
  ) {
    this.#directory = uploadDirectory(deps.dataDir);
    this.#server = new Server({
      path,
      datastore: new VideoUploadStore(this.#directory, deps.repository, deps.expiryMs, deps.logger),
      maxSize: deps.maxBytes,
      // The client resolves it against the endpoint it called, so it works behind any proxy.
      relativeLocation: true,
      // The library would take the id from the end of the whole URL, query string included, so
      // `.../{own}?x=/{another's}` reached an upload the caller was never authorized for.
      getFileIdFromRequest: (request) => {
        const node = nodeRequestOf(request);
        return node && this.#uploadIds.get(node);
      },
      disableTerminationForFinishedUploads: true,
      allowedHeaders: ["X-API-Key", "AuthorizationSignature", "AuthorizationExpire", "LibraryId", "VideoId"],
      // Not in the library's own list, though the expiration extension sends it.
      exposedHeaders: ["Upload-Expires"],
      onUploadCreate: (request, upload) => this.#onCreate(request, upload),
      onUploadFinish: async (_request, upload) => {
        await this.#refuseIfReplaced(upload);
        await this.#recordLastByte(upload.id);
        await this.#finish(upload.id);
        return {};
      },
      onResponseError: async (request, error) => {
        // A creation refused after its upload was made (more bytes than Upload-Length in a chunked
        // body): the answer carries no Location, so nothing could ever resume it.
        const node = nodeRequestOf(request);
        const created = node && this.#created.get(node);
        if (created !== undefined) await this.#remove(created);
        if ("status_code" in error) return undefined;
        // The bucket, or this node's disk under the partial uploads, failing is not the client's doing.
        if (isStorageFailure(error)) {
          // An upload that exists keeps its bytes: a HEAD once storage is back finishes it. A creation
          // refused so has no Location, and is made again by the client.
          deps.logger.warn({ err: error }, "resumable upload failed: media storage unavailable");
          return tusError(503, STORAGE_UNAVAILABLE_MESSAGE);
        }
        // The store (SQLite's disk full, PostgreSQL away) under a creation's record: as on every route.
        if (isStoreUnavailable(error)) {
          deps.logger.warn({ err: error }, "resumable upload failed: store unavailable");
          return tusError(503, STORE_UNAVAILABLE_MESSAGE);
        }
        // The library would append the error's own message (a file path, a disk error) to its 500.
        deps.logger.error({ err: error }, "resumable upload failed");
        return tusError(500, "Internal server error");
      },
    });
  }

  /**
   * Hands a request to the tus server: a creation with the video it is for (`binding`), a request
   * on an upload with the id the route authorized (`uploadId`); tus acts on no other upload.
   */
  async handle(
    request: IncomingMessage,
    response: ServerResponse,
    authorized: { binding?: UploadBinding; uploadId?: string } = {},
  ): Promise<void> {
    if (authorized.binding) this.#bindings.set(request, authorized.binding);
    if (authorized.uploadId) this.#uploadIds.set(request, authorized.uploadId);
    await this.#server.handle(request, withReasonPhrases(response));
    // A creation with upload whose connection was cut before its body ended: no client got its
    // Location, so nothing could resume it, yet it held a partial file and one of the video's open
    // uploads for a day (QA of 4 December).
    const created = this.#created.get(request);
    if (created !== undefined && !request.complete) await this.#remove(created);
  }

  find(id: string): Promise<VideoUploadRow | undefined> {
    return this.deps.repository.findUpload(id);
  }

  /** The binding of a new upload to a video; undefined when there is no such video (of `organizationId`, when given). */
  async bindingFor(
    libraryId: string,
    videoId: string,
    organizationId?: string,
  ): Promise<UploadBinding | undefined> {
    const video = await this.deps.videos.find(libraryId, videoId);
    if (!video || (organizationId !== undefined && video.organization_id !== organizationId))
      return undefined;
    return { organizationId: video.organization_id, libraryId: video.library_id, videoId: video.id };
  }

  async #onCreate(request: unknown, upload: Upload): Promise<{ metadata: TusMetadata }> {
    const node = nodeRequestOf(request);
    const binding = node && this.#bindings.get(node);
    if (!binding) throw tusError(500, "Upload creation without a video");
    if (upload.size === 0) throw tusError(400, "Upload-Length must be at least 1 byte");
    const metadata = { ...upload.metadata, library_id: binding.libraryId, video_id: binding.videoId };
    const { repository, videos, transact } = this.deps;
    const { libraryId, videoId } = binding;
    // One transaction, with the video's row locked, so that creations on one video at once count
    // each other and a video deleted meanwhile is a 404, not a broken reference.
    const removed = await transact(async (trx) => {
      if (!(await videos.lock(trx, libraryId, videoId))) throw tusError(404, "The video no longer exists");
      await repository.insertUpload(trx, {
        id: upload.id,
        organization_id: binding.organizationId,
        library_id: libraryId,
        video_id: videoId,
        size_bytes: upload.size ?? null,
        metadata: writeJson(metadata) ?? "{}",
        completed_at: null,
        source_generation: null,
        created_at: nowIso(this.deps.clock),
      });
      return this.#removeOldestBeyondLimit(trx, videoId, upload.id);
    });
    this.#created.set(node, upload.id);
    for (const id of removed) {
      // A file left behind has no record any more, and the next housekeeping pass takes it.
      await rm(join(this.#directory, id), { force: true }).catch((error: unknown) =>
        this.deps.logger.warn({ err: error, upload: id }, "removed upload's bytes not deleted yet"),
      );
    }
    return { metadata };
  }

  /**
   * Only one upload can become a video's source, yet each may hold up to `maxBytes` until it
   * expires: without a bound, whoever holds a video's signed upload authorization (a browser, not
   * the organization) could fill the disk by creating upload after upload. The records of the oldest
   * beyond `openPerVideo` go (their files are for the caller to remove once this commits); a client
   * still sending to one gets 404 and starts a new upload.
   */
  async #removeOldestBeyondLimit(trx: Executor, videoId: string, created: string): Promise<string[]> {
    const { repository, openPerVideo } = this.deps;
    const others = (await repository.openUploadIdsOf(trx, videoId)).filter((id) => id !== created);
    const removed = others.slice(openPerVideo - 1);
    for (const id of removed) await repository.deleteUpload(trx, id);
    return removed;
  }

  /**
   * The bytes a PATCH counted to the upload's end are all in its file. A file replaced while the PATCH
   * ran (a developer-mode snapshot load puts the saved bytes back, QA of 6 December) took the rest
   * into the file that was there before, and must not become the video's source, nor the upload be
   * answered complete: 409, as for an offset that does not match, so a tus client asks for the
   * offset with HEAD and resumes. A file gone with its record (a reset) is the 404 that follows.
   */
  async #refuseIfReplaced(upload: Upload): Promise<void> {
    const held = await stat(join(this.#directory, upload.id)).catch(() => undefined);
    if (held && held.size !== upload.size) {
      throw tusError(
        409,
        "The upload's file was replaced while this request ran: ask for its offset (HEAD) and resume",
      );
    }
  }

  /**
   * The last byte is stored: the video's source generation now is what this upload is counted from
   * (docs/decisions.md, Video sources). A finish that runs later (a stranded upload copied at the
   * next pass) then loses to a source accepted meanwhile.
   */
  async #recordLastByte(id: string): Promise<void> {
    const { repository, pipeline } = this.deps;
    const record = await repository.findUpload(id);
    if (!record || record.source_generation !== null) return;
    const generation = await pipeline.sourceGeneration(record.video_id);
    await repository.updateUpload(repository.db, id, { source_generation: generation });
  }

  /**
   * Finishes an upload that holds all its bytes but whose move into the blob store failed (a full
   * disk) or never ran (the process ended first). Run before a HEAD is answered: that answer says
   * the upload is complete, which must not be true of one whose video never gets its source (one
   * that another node is moving gets it: should that move fail, the next pass finishes it).
   * Errors as the API's: the video gone is 404, a newer source given to the video since the upload's
   * last byte was stored 409, anything else stays an error (500, logged).
   */
  async finishStranded(record: VideoUploadRow): Promise<void> {
    if (!(await this.#holdsAllBytes(record))) return;
    try {
      await this.#finish(record.id);
    } catch (error) {
      const status = (error as { status_code?: number }).status_code;
      if (status === 404) throw ApiError.notFound();
      if (status === 409) throw ApiError.conflict(SUPERSEDED_MESSAGE);
      throw error;
    }
  }

  /**
   * Finishes, without waiting for a HEAD, every stranded upload (see `finishStranded`) whose bytes
   * this node holds: a client that gave up, or a closed browser tab, never sends one. The uploads
   * dir is this node's own, so only the node holding a file finishes it. One that still cannot be
   * moved (media storage down) is left for the next pass, with one warning per pass. Returns how
   * many were finished.
   */
  async finishStrandedUploads(): Promise<number> {
    let finished = 0;
    const failures: unknown[] = [];
    for (const record of await this.deps.repository.unfinishedUploads()) {
      if (!(await this.#holdsAllBytes(record))) continue;
      try {
        if ((await this.#finish(record.id)) === "moved") finished += 1;
      } catch (error) {
        // Refused for good (its video deleted, an empty file): the upload is already removed.
        if ((error as { status_code?: number }).status_code === undefined) failures.push(error);
      }
    }
    if (failures.length > 0) {
      this.deps.logger.warn(
        { err: failures[0], uploads: failures.length },
        "resumable uploads holding all their bytes could not be finished; tried again later",
      );
    }
    return finished;
  }

  /** Whether all the bytes of an upload not yet finished are in this node's uploads dir. */
  async #holdsAllBytes(record: VideoUploadRow): Promise<boolean> {
    if (record.completed_at || record.size_bytes === null) return false;
    const held = await stat(join(this.#directory, record.id)).catch(() => undefined);
    return held?.size === Number(record.size_bytes);
  }

  /** Moves the upload into the blob store, once per node however asked; `elsewhere`: another node does. */
  #finish(id: string): Promise<"moved" | "elsewhere"> {
    let finishing = this.#finishing.get(id);
    if (!finishing) {
      finishing = this.#moveToSource(id).finally(() => this.#finishing.delete(id));
      this.#finishing.set(id, finishing);
    }
    return finishing;
  }

  /** The last byte arrived: the file becomes the video's source and processing starts. */
  async #moveToSource(id: string): Promise<"moved" | "elsewhere"> {
    const { repository, videos, blobs, pipeline, clock, maxBytes } = this.deps;
    const record = await repository.findUpload(id);
    const file = join(this.#directory, id);
    if (!record) {
      // Its video was deleted while the last bytes arrived: the file has no upload to belong to.
      await rm(file, { force: true });
      throw tusError(404, "The upload no longer exists");
    }
    if (record.completed_at) return "moved";
    const video = await videos.find(record.library_id, record.video_id);
    if (!video) {
      await this.#remove(id);
      throw tusError(404, "The video no longer exists");
    }
    // Nodes sharing the uploads folder all see the file: one moves it, or the video is processed
    // once per move. A node that dies mid-move leaves the claim to run out.
    const now = clock.now();
    const until = laterBy(now, FINISHING_LEASE_MS).toISOString();
    if (!(await repository.claimFinishing(id, now.toISOString(), until))) return "elsewhere";
    try {
      const stored = await blobs.put(
        sourceKey(record.library_id, record.video_id, randomUUID()),
        createReadStream(file),
        { maxBytes },
      );
      // A refused source's file is removed by `acceptSource`. A source accepted since this upload's
      // last byte was stored is newer (a one-request upload made while this one was stranded, say).
      const accepted = await pipeline.acceptSourceAskedAt(
        video,
        stored,
        record.source_generation ?? undefined,
      );
      if (accepted.outcome !== "accepted") {
        await this.#remove(id);
        const [status, message] = REFUSALS[accepted.outcome];
        throw tusError(status, message);
      }
    } catch (error) {
      // The next HEAD or pass, here or on another node, tries again at once.
      await repository.updateUpload(repository.db, id, { finishing_until: null }).catch(() => undefined);
      throw error;
    }
    // The record stays until it expires, so a client that missed the last answer sees the upload complete.
    await repository.updateUpload(repository.db, id, { completed_at: nowIso(clock) });
    await rm(file, { force: true });
    return "moved";
  }

  async #remove(id: string): Promise<void> {
    await rm(join(this.#directory, id), { force: true });
    await this.deps.repository.deleteUpload(this.deps.repository.db, id);
  }

  /**
   * Housekeeping: removes uploads created before `before` (abandoned ones with their partial file,
   * finished ones' records), and files no record names (their video was deleted, or its library),
   * whatever their age. Returns how many.
   */
  async pruneCreatedBefore(before: Date): Promise<number> {
    const expired = await this.deps.repository.uploadsCreatedBefore(before.toISOString());
    for (const id of expired) await this.#remove(id);
    // The folder is listed before the records are read: an upload's record is written before its
    // file, so a file listed here whose record is not read next has lost it for good.
    const files = await readdir(this.#directory).catch(() => [] as string[]);
    const known = new Set(await this.deps.repository.uploadIds());
    const orphans = files.filter((name) => !known.has(name));
    for (const name of orphans) await rm(join(this.#directory, name), { force: true, recursive: true });
    return expired.length + orphans.length;
  }
}

/**
 * The tus server answers through web `Response`s whose `statusText` is empty, and passes it on as the
 * reason phrase (`HTTP/1.1 201 `); an empty one is replaced by the standard phrase. Its error mapping
 * sets no headers, so its 503s (storage or store unavailable, `onResponseError`) get a Retry-After here.
 */
function withReasonPhrases(response: ServerResponse): ServerResponse {
  const writeHead = response.writeHead.bind(response) as (
    status: number,
    ...rest: unknown[]
  ) => ServerResponse;
  response.writeHead = ((status: number, ...rest: unknown[]) => {
    if (status === 503) response.setHeader("Retry-After", String(STORAGE_RETRY_AFTER_S));
    return rest[0] === ""
      ? writeHead(status, STATUS_CODES[status] ?? "", ...rest.slice(1))
      : writeHead(status, ...rest);
  }) as ServerResponse["writeHead"];
  return response;
}
