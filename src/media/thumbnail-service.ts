import { randomUUID } from "node:crypto";
import { fileTypeFromBuffer } from "file-type";
import { nowIso } from "../clock.ts";
import type { FieldError } from "../http/errors.ts";
import { THUMBNAIL_FILE } from "../video/transcoder.ts";
import type { MediaDeps } from "./context.ts";
import { keepFileOnlyWhen, receivedHead, requiredField } from "./received-files.ts";
import type { VideoRow } from "./tables.ts";
import type { ReceivedForm } from "./uploads.ts";
import { videoAssetUrl, videoBlobPrefix } from "./urls.ts";

export type ThumbnailOutcome =
  | { outcome: "uploaded"; video: VideoRow }
  | { outcome: "not_found" }
  | { outcome: "invalid"; errors: FieldError[] };

const IMAGE_TYPES: Record<string, string> = {
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".png": "image/png",
  ".gif": "image/gif",
};

const extensionOf = (filename: string): string => {
  const match = /\.[^.]+$/.exec(filename);
  return match ? match[0].toLowerCase() : "";
};

/** The magic numbers `file-type` needs to recognise an image. */
const IMAGE_HEAD_BYTES = 4100;

/** Uploaded thumbnails: an image whose content matches its extension replaces the video's thumbnail. */
export class ThumbnailService {
  constructor(private readonly deps: MediaDeps) {}

  /** Where an uploaded thumbnail of the video is stored. */
  fileKey(video: VideoRow): string {
    return `${videoBlobPrefix(video.library_id, video.id)}/thumbnails/${randomUUID()}`;
  }

  /**
   * Records the uploaded image and points the video's `thumbnail_url` at it (served by the library's
   * distribution as `/{video_id}/thumbnail.jpg`). Earlier uploads are replaced; a refused file is removed.
   */
  upload(video: VideoRow, form: ReceivedForm): Promise<ThumbnailOutcome> {
    return keepFileOnlyWhen(this.deps.removals, form, "uploaded", () => this.#save(video, form));
  }

  async #save(video: VideoRow, form: ReceivedForm): Promise<ThumbnailOutcome> {
    const { transact, videos, blobs, removals, clock, config } = this.deps;
    const file = form.file;
    if (!file) return { outcome: "invalid", errors: [requiredField("file")] };
    const expected = IMAGE_TYPES[extensionOf(file.filename)];
    const head = await receivedHead(blobs, file.key, IMAGE_HEAD_BYTES);
    if (!head) return { outcome: "not_found" };
    const detected = await fileTypeFromBuffer(head);
    if (!expected || detected?.mime !== expected) {
      return {
        outcome: "invalid",
        errors: [
          {
            field: "file",
            code: "validation_mimes",
            message:
              "The file field must be a .jpg, .jpeg, .png or .gif image whose content matches its extension.",
          },
        ],
      };
    }
    const now = nowIso(clock);
    const saved = await transact(async (trx) => {
      // Locked: a deletion of the video waits, or has happened and it is not found.
      const current = await videos.lock(trx, video.library_id, video.id);
      if (!current) return undefined;
      const previous = await videos.thumbnailsOf(trx, video.id);
      await videos.deleteThumbnails(
        trx,
        previous.map((row) => row.id),
      );
      await videos.insertThumbnail(trx, {
        id: randomUUID(),
        organization_id: video.organization_id,
        library_id: video.library_id,
        video_id: video.id,
        path: file.key,
        content_type: expected,
        size_bytes: file.sizeBytes,
        created_at: now,
      });
      const changes = {
        thumbnail_url: videoAssetUrl(config, video.library_id, video.id, THUMBNAIL_FILE),
        updated_at: now,
      };
      await videos.update(trx, video.id, changes, "always");
      const replaced = await removals.queue(trx, { keys: previous.map((row) => row.path) });
      return { video: { ...current, ...changes }, replaced };
    });
    if (!saved) return { outcome: "not_found" };
    await removals.carryOut(saved.replaced);
    return { outcome: "uploaded", video: saved.video };
  }
}
