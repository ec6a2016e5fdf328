import { useMemo, useSyncExternalStore } from "react";
import type { DetailedError, PreviousUpload, UrlStorage } from "tus-js-client";
import { ApiFailure, api, call } from "../../api.ts";
import { useSignedIn } from "../../session.tsx";

/** A size in the words of a file manager: "2 GB", "1.5 MB" (binary multiples, as they count). */
export function sizeInWords(bytes: number): string {
  const units = ["bytes", "KB", "MB", "GB", "TB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const shown = unit === 0 ? String(value) : String(Math.round(value * 10) / 10);
  return `${shown} ${units[unit]}`;
}

/**
 * The largest source the server takes, from the tus endpoint's `Tus-Max-Size` (its OPTIONS answer
 * needs no authentication); `undefined` when it cannot be read (the server still refuses with 413).
 */
let maxSize: Promise<number | undefined> | undefined;
export function maxUploadBytes(): Promise<number | undefined> {
  maxSize ??= api.OPTIONS("/v1/media/tus").then(
    ({ response }) => {
      const value = Number(response.headers.get("tus-max-size"));
      return Number.isSafeInteger(value) && value > 0 ? value : undefined;
    },
    () => undefined,
  );
  const asked = maxSize;
  // A failed read is asked again next time.
  asked.then((value) => {
    if (value === undefined && maxSize === asked) maxSize = undefined;
  });
  return asked;
}

export const tooLarge = (limit: number | undefined) =>
  limit === undefined
    ? "The file is larger than the server accepts."
    : `The file is larger than the ${sizeInWords(limit)} limit.`;

/** A refusal shown beside the form's file field. */
const fileRefusal = (message: string, status = 400) =>
  new ApiFailure(status, message, { file: message }, undefined);

/** Refuses a file over the server's limit before anything is made for it. */
export async function refuseTooLarge(file: File): Promise<void> {
  const limit = await maxUploadBytes();
  if (limit !== undefined && file.size > limit) throw fileRefusal(tooLarge(limit), 413);
}

/** What a failed tus upload means to the person uploading, in place of tus-js-client's own text. */
function uploadFailure(error: Error | DetailedError, limit: number | undefined): string {
  const detailed = error as Partial<DetailedError>;
  const status = detailed.originalResponse?.getStatus();
  if (!status) {
    return detailed.originalRequest
      ? "The connection to the server was lost during the upload. Check your network and try again."
      : "The file could not be read for the upload. Choose it again and retry.";
  }
  if (status === 413) return tooLarge(limit);
  if (status === 401 || status === 403) {
    return "The server refused the upload: its authorization expired or is not valid. Try again.";
  }
  if (status === 404 || status === 410) {
    return "The upload is no longer on the server (it expired or was removed). Try again.";
  }
  if (status === 409) return "The upload got out of step with the server. Try again.";
  if (status === 429) return "Too many uploads at once. Wait a moment and try again.";
  if (status >= 500) return `The server could not take the file (error ${status}). Try again later.`;
  return `The server refused the upload (error ${status}).`;
}

/** A failed upload, with how much of the file the server confirmed during this attempt. */
export class UploadFailed extends Error {
  constructor(
    message: string,
    readonly bytesConfirmed: number,
    /** The server no longer has the upload (404/410): it cannot be resumed. */
    readonly gone: boolean,
  ) {
    super(message);
  }
}

/** Whose records: another person signed in on the same browser never sees them. */
export interface UploadOwner {
  organizationId: string;
  userId: string;
}

export function useUploadOwner(): UploadOwner {
  const { organization, user } = useSignedIn();
  return { organizationId: organization.id, userId: user.uuid };
}

/** An upload this browser started and did not finish: what the console needs to offer resuming it. */
export interface UnfinishedUpload {
  /** The tus upload's URL; also the record's key (tus-js-client's `urlStorageKey`). */
  uploadUrl: string;
  /** The file and video it is for (`fingerprintOf`): another file never continues this upload. */
  fingerprint: string;
  libraryId: string;
  videoId: string;
  videoTitle: string;
  fileName: string;
  fileSize: number;
  startedAt: string;
}

/** Unfinished uploads of one person: tus-js-client stores and removes them through `recordsFor`. */
const RECORDS_KEY_PREFIX = "cumulo.unfinished-uploads.";
const storageKey = (owner: UploadOwner) => `${RECORDS_KEY_PREFIX}${owner.organizationId}.${owner.userId}`;

function readRecords(owner: UploadOwner): UnfinishedUpload[] {
  try {
    const stored: unknown = JSON.parse(localStorage.getItem(storageKey(owner)) ?? "[]");
    return Array.isArray(stored) ? stored : [];
  } catch {
    return [];
  }
}

function writeRecords(owner: UploadOwner, records: UnfinishedUpload[]): void {
  try {
    if (records.length === 0) localStorage.removeItem(storageKey(owner));
    else localStorage.setItem(storageKey(owner), JSON.stringify(records));
  } catch {
    // Storage refused (full, or disabled): the upload goes on, it just cannot be resumed after a reload.
  }
  changed();
}

export function forgetUnfinished(owner: UploadOwner, uploadUrl: string): void {
  writeRecords(
    owner,
    readRecords(owner).filter((record) => record.uploadUrl !== uploadUrl),
  );
}

/** The records of one video's uploads, for the video that this attempt made and then deleted. */
export function forgetUnfinishedOfVideo(owner: UploadOwner, videoId: string): void {
  writeRecords(
    owner,
    readRecords(owner).filter((record) => record.videoId !== videoId),
  );
}

/**
 * The file as tus-js-client tells uploads apart: name, type, size and last change, and the video
 * (every upload goes to the same endpoint, so the endpoint alone would let a file of one video
 * continue another's upload).
 */
const fingerprintOf = (file: File, videoId: string) =>
  JSON.stringify(["cumulo", videoId, file.name, file.type, file.size, file.lastModified]);

interface Video {
  libraryId: string;
  videoId: string;
  title: string;
}

/** tus-js-client's URL storage, kept in the owner's records with what the console shows of them. */
function recordsFor(owner: UploadOwner, video: Video, file: File): UrlStorage {
  const previous = (record: UnfinishedUpload): PreviousUpload => ({
    size: record.fileSize,
    metadata: {},
    creationTime: record.startedAt,
    urlStorageKey: record.uploadUrl,
    uploadUrl: record.uploadUrl,
    parallelUploadUrls: null,
  });
  return {
    findAllUploads: async () => readRecords(owner).map(previous),
    findUploadsByFingerprint: async (fingerprint) =>
      readRecords(owner)
        .filter((record) => record.fingerprint === fingerprint)
        .map(previous),
    removeUpload: async (uploadUrl) => forgetUnfinished(owner, uploadUrl),
    addUpload: async (fingerprint, upload) => {
      const uploadUrl = upload.uploadUrl ?? "";
      writeRecords(owner, [
        ...readRecords(owner).filter((record) => record.uploadUrl !== uploadUrl),
        {
          uploadUrl,
          fingerprint,
          libraryId: video.libraryId,
          videoId: video.videoId,
          videoTitle: video.title,
          fileName: file.name,
          fileSize: file.size,
          startedAt: new Date().toISOString(),
        },
      ]);
      return uploadUrl;
    },
  };
}

/** An upload running in this tab: its progress (0-1), and whether it continues an unfinished one. */
export interface RunningUpload {
  progress: number;
  resumed: boolean;
}

/** Uploads running in this tab, by video, whichever page is shown: leaving or reloading the tab asks first. */
const running = new Map<string, RunningUpload>();
const askBeforeLeaving = (event: BeforeUnloadEvent) => {
  event.preventDefault();
  // Older browsers ask only when a return value is set.
  event.returnValue = "";
};
function setRunning(videoId: string, upload: RunningUpload | undefined): void {
  const before = running.size;
  if (upload) running.set(videoId, upload);
  else running.delete(videoId);
  if (before === 0 && running.size > 0) window.addEventListener("beforeunload", askBeforeLeaving);
  if (before > 0 && running.size === 0) window.removeEventListener("beforeunload", askBeforeLeaving);
  changed();
}

/**
 * An upload holds a Web Lock named for its video while it runs, so that another tab or window of this
 * browser neither continues nor discards it meanwhile (two tabs sending one upload's bytes would
 * undo each other's progress). Web Locks exist only on pages served over HTTPS or from localhost;
 * elsewhere tabs do not know of each other's uploads.
 */
const UPLOAD_LOCK_PREFIX = "cumulo.upload.";
const webLocks: LockManager | undefined = globalThis.navigator?.locks;

export const UPLOADING_ELSEWHERE =
  "This video's file is being uploaded in another tab or window of this browser.";

/** Runs the upload holding its video's lock; refused at once when another tab holds it. */
function holdingUploadLock(videoId: string, upload: () => Promise<void>): Promise<void> {
  if (!webLocks) return upload();
  const held = webLocks.request<void>(
    `${UPLOAD_LOCK_PREFIX}${videoId}`,
    { ifAvailable: true },
    async (lock) => {
      if (!lock)
        throw fileRefusal(`${UPLOADING_ELSEWHERE} Let it finish there, or close that tab first.`, 409);
      return upload();
    },
  );
  // Its release is read at once, not at the next poll: for up to 2 s the page said that the upload
  // this tab had just ended ran in another tab, and offered no way to continue it.
  return held.finally(() => void readHeldLocks());
}

/** Videos whose upload lock is held, by this tab or another. */
let locked: ReadonlySet<string> = new Set();

async function readHeldLocks(): Promise<void> {
  if (!webLocks) return;
  const { held = [] } = await webLocks.query();
  const videos = new Set(
    held
      .map((lock) => lock.name ?? "")
      .filter((name) => name.startsWith(UPLOAD_LOCK_PREFIX))
      .map((name) => name.slice(UPLOAD_LOCK_PREFIX.length)),
  );
  if (videos.size === locked.size && [...videos].every((videoId) => locked.has(videoId))) return;
  locked = videos;
  changed();
}

/** How often a shown page looks for uploads started or ended in other tabs (a lock's release has no event). */
const OTHER_TABS_POLL_MS = 2000;

/** Records written by another tab (an upload started, finished or discarded there). */
const onStorage = (event: StorageEvent) => {
  if (event.key !== null && !event.key.startsWith(RECORDS_KEY_PREFIX)) return;
  changed();
  void readHeldLocks();
};

let otherTabsPoll: ReturnType<typeof setInterval> | undefined;
function watchOtherTabs(watch: boolean): void {
  if (watch) {
    window.addEventListener("storage", onStorage);
    otherTabsPoll = setInterval(() => void readHeldLocks(), OTHER_TABS_POLL_MS);
    void readHeldLocks();
  } else {
    window.removeEventListener("storage", onStorage);
    clearInterval(otherTabsPoll);
  }
}

let version = 0;
const listeners = new Set<() => void>();
function changed(): void {
  version += 1;
  for (const listener of listeners) listener();
}
const subscribe = (listener: () => void) => {
  listeners.add(listener);
  if (listeners.size === 1) watchOtherTabs(true);
  return () => {
    listeners.delete(listener);
    if (listeners.size === 0) watchOtherTabs(false);
  };
};

/**
 * The owner's unfinished uploads, the uploads running in this tab and the videos whose upload runs
 * in another tab of this browser, kept current.
 */
export function useVideoUploads(owner: UploadOwner): {
  unfinished: UnfinishedUpload[];
  running: ReadonlyMap<string, RunningUpload>;
  elsewhere: ReadonlySet<string>;
} {
  const seen = useSyncExternalStore(subscribe, () => version);
  // biome-ignore lint/correctness/useExhaustiveDependencies: `seen` changes whenever the records may have
  const unfinished = useMemo(() => readRecords(owner), [seen, owner.organizationId, owner.userId]);
  // biome-ignore lint/correctness/useExhaustiveDependencies: `seen` changes whenever either set may have
  const elsewhere = useMemo(() => new Set([...locked].filter((videoId) => !running.has(videoId))), [seen]);
  return { unfinished, running, elsewhere };
}

/** Valid long enough for a slow upload; a resumed upload asks for a fresh one. */
const AUTHORIZATION_S = 6 * 3600;
const CHUNK_BYTES = 8 * 1024 * 1024;

/**
 * Uploads the file of an existing video with tus, authorized by a signed upload authorization the
 * API gives for that one video (the browser never holds an API key). The upload is recorded for the
 * owner until it finishes, so that after a reload the same file can continue it (`resuming`): from
 * the server's offset, with a fresh authorization, and never with another file.
 */
export async function uploadVideoFile({
  owner,
  video,
  file,
  resuming,
}: {
  owner: UploadOwner;
  video: Video;
  file: File;
  resuming?: UnfinishedUpload;
}): Promise<void> {
  const fingerprint = fingerprintOf(file, video.videoId);
  if (resuming && resuming.fingerprint !== fingerprint) {
    throw fileRefusal(
      `This is not the file of this upload: choose “${resuming.fileName}” (${sizeInWords(resuming.fileSize)}) as it was when the upload started.`,
    );
  }
  await holdingUploadLock(video.videoId, () => sendFile({ owner, video, file, resuming, fingerprint }));
}

async function sendFile({
  owner,
  video,
  file,
  resuming,
  fingerprint,
}: {
  owner: UploadOwner;
  video: Video;
  file: File;
  resuming: UnfinishedUpload | undefined;
  fingerprint: string;
}): Promise<void> {
  setRunning(video.videoId, { progress: 0, resumed: Boolean(resuming) });
  let bytesConfirmed = 0;
  try {
    const authorization = await call(
      api.POST("/v1/media/libraries/{libraryId}/videos/{videoId}/upload-authorization", {
        params: { path: { libraryId: video.libraryId, videoId: video.videoId } },
        body: { expires_in_s: AUTHORIZATION_S },
      }),
    );
    const limit = await maxUploadBytes();
    const { Upload } = await import("tus-js-client");
    await new Promise<void>((resolve, reject) => {
      const upload = new Upload(file, {
        // A resumed upload continues at its URL or fails: tus-js-client would otherwise start a new
        // upload from the first byte when the server no longer has it.
        // At the console's own origin, as every other call of the console: the authorization's endpoint
        // is built from the Host the API saw, which a proxy in front may have changed (a port dropped).
        endpoint: resuming
          ? null
          : new URL(new URL(authorization.data.endpoint).pathname, window.location.origin).toString(),
        headers: { ...authorization.data.headers },
        metadata: { filename: file.name, filetype: file.type },
        chunkSize: CHUNK_BYTES,
        retryDelays: [0, 1000, 3000],
        fingerprint: async () => fingerprint,
        urlStorage: recordsFor(owner, video, file),
        storeFingerprintForResuming: true,
        removeFingerprintOnSuccess: true,
        onProgress: (sent, total) =>
          setRunning(video.videoId, { progress: total > 0 ? sent / total : 0, resumed: Boolean(resuming) }),
        onChunkComplete: (_chunk, accepted) => {
          bytesConfirmed = accepted;
        },
        onError: (error) => {
          console.warn("The upload failed:", error);
          const status = (error as Partial<DetailedError>).originalResponse?.getStatus();
          // A request cut off may have left bytes on the server though no answer confirmed them (a
          // file of one chunk, cut part-way): the server is asked, so a video holding some is kept
          // for resuming instead of being removed as empty (QA of 6 December).
          const asked =
            bytesConfirmed > 0 || !upload.url
              ? Promise.resolve(bytesConfirmed)
              : uploadOnServer({ uploadUrl: upload.url }).then(
                  (found) => (found.state === "partial" ? found.offset : 0),
                  () => 0,
                );
          void asked.then((bytes) =>
            reject(new UploadFailed(uploadFailure(error, limit), bytes, status === 404 || status === 410)),
          );
        },
        onSuccess: () => resolve(),
      });
      if (!resuming) return upload.start();
      upload.findPreviousUploads().then((found) => {
        const previous = found.find((stored) => stored.urlStorageKey === resuming.uploadUrl);
        // Finished or discarded meanwhile (in another tab).
        if (!previous) return reject(new UploadFailed("This upload is no longer listed.", 0, true));
        upload.resumeFromPreviousUpload(previous);
        upload.start();
      }, reject);
    });
  } finally {
    setRunning(video.videoId, undefined);
  }
}

/** How much of an unfinished upload the server has, or that it has none of it any more. */
type UploadOnServer = { state: "partial"; offset: number } | { state: "complete" } | { state: "gone" };

const uploadIdOf = (uploadUrl: string) => new URL(uploadUrl).pathname.split("/").pop() ?? "";
const TUS_HEADERS = { "tus-resumable": "1.0.0" };
const isGone = (error: unknown) =>
  error instanceof ApiFailure && (error.status === 404 || error.status === 410);

/** Asks the server (tus HEAD, with the session) how far an unfinished upload got. */
export async function uploadOnServer(record: Pick<UnfinishedUpload, "uploadUrl">): Promise<UploadOnServer> {
  const asked = api.HEAD("/v1/media/tus/{uploadId}", {
    params: { path: { uploadId: uploadIdOf(record.uploadUrl) }, header: TUS_HEADERS },
  });
  try {
    await call(asked);
  } catch (error) {
    if (isGone(error)) return { state: "gone" };
    throw error;
  }
  const { headers } = (await asked).response;
  const offset = Number(headers.get("upload-offset"));
  const length = Number(headers.get("upload-length"));
  return offset >= length ? { state: "complete" } : { state: "partial", offset };
}

/** Abandons an unfinished upload: the server deletes its bytes (tus termination) and the record goes. */
export async function discardUnfinished(owner: UploadOwner, record: UnfinishedUpload): Promise<void> {
  try {
    await call(
      api.DELETE("/v1/media/tus/{uploadId}", {
        params: { path: { uploadId: uploadIdOf(record.uploadUrl) }, header: TUS_HEADERS },
      }),
    );
  } catch (error) {
    if (!isGone(error)) throw error;
  }
  forgetUnfinished(owner, record.uploadUrl);
}
