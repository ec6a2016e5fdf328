import type { Selectable } from "kysely";
import type { JsonText, Timestamp } from "../../store/types.ts";

/**
 * A resumable (tus) upload of a video's source. The record lives in the store, so any API node can
 * continue an upload another started; the bytes received so far are a file under the shared data dir
 * (`{CUMULO_DATA_DIR}/uploads/{id}`), whose size is the upload's offset.
 */
export interface VideoUploadTable {
  /** The tus upload id (the last segment of the upload URL). */
  id: string;
  organization_id: string;
  library_id: string;
  video_id: string;
  /** `Upload-Length`; null while the client defers it. */
  size_bytes: number | null;
  /** The tus metadata as sent (plus `library_id`/`video_id`), JSON. */
  metadata: JsonText;
  /** Set once the last byte arrived and the source was handed to processing. */
  completed_at: Timestamp | null;
  /** While a node moves the finished upload into the blob store: until when that claim holds. */
  finishing_until: Timestamp | null;
  /**
   * The video's source generation when the upload's last byte was stored; a source accepted since is
   * newer, and the upload does not replace it. Null until then, and for uploads of a process that
   * ended between its last byte and this record (finished as before migration 0703).
   */
  source_generation: number | null;
  created_at: Timestamp;
}

export type ImportStatus = "queued" | "downloading" | "stored" | "failed";

/** The latest import of a video's source from a URL (one per video; a new import replaces it). */
export interface VideoImportTable {
  video_id: string;
  /** Changes with every import, so a job of a replaced import stops. */
  id: string;
  organization_id: string;
  library_id: string;
  url: string;
  status: ImportStatus;
  bytes_received: number;
  /** The origin's `Content-Length`, when it sent one. */
  content_length: number | null;
  failure_reason: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface UploadTables {
  video_uploads: VideoUploadTable;
  video_imports: VideoImportTable;
}

export type VideoUploadRow = Selectable<VideoUploadTable>;
export type VideoImportRow = Selectable<VideoImportTable>;
