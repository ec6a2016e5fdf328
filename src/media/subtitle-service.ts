import { randomUUID } from "node:crypto";
import { nowIso } from "../clock.ts";
import type { FieldError } from "../http/errors.ts";
import type { Page } from "../http/pagination.ts";
import { hasControlCharacter, isBlank, NAME_FORMAT } from "../text.ts";
import type { MediaDeps } from "./context.ts";
import { emptyField, keepFileOnlyWhen, receivedHead, requiredField } from "./received-files.ts";
import { canonicalLanguage, detectSubtitleFormat, type SubtitleFormat } from "./subtitle-format.ts";
import type { SubtitleRow, VideoRow } from "./tables.ts";
import type { ReceivedForm } from "./uploads.ts";
import { videoBlobPrefix } from "./urls.ts";

export type SubtitleOutcome<Done extends string> =
  | { outcome: Done; subtitle: SubtitleRow }
  | { outcome: "not_found" }
  | { outcome: "invalid"; errors: FieldError[] };

const MAX_TITLE = 255;

function checkTitle(value: string | undefined, errors: FieldError[]): string | undefined {
  if (value === undefined || isBlank(value)) {
    errors.push(value === undefined ? requiredField("title") : emptyField("title"));
    return undefined;
  }
  if (hasControlCharacter(value)) {
    errors.push({
      field: "title",
      code: "validation_format",
      message: `The title field has an invalid format. It must be ${NAME_FORMAT}.`,
    });
    return undefined;
  }
  // Characters (code points), as the schemas of JSON fields count them, not UTF-16 units.
  if ([...value].length > MAX_TITLE) {
    errors.push({
      field: "title",
      code: "validation_max",
      message: `The title field must be at most ${MAX_TITLE} characters long.`,
    });
    return undefined;
  }
  return value;
}

function checkLanguage(value: string | undefined, errors: FieldError[]): string | undefined {
  if (value === undefined || isBlank(value)) {
    errors.push(value === undefined ? requiredField("language") : emptyField("language"));
    return undefined;
  }
  const canonical = canonicalLanguage(value);
  if (!canonical) {
    errors.push({
      field: "language",
      code: "validation_format",
      message:
        "The language field has an invalid format. It must be a well-formed BCP 47 language tag such as en, pt-BR or zh-Hans.",
    });
  }
  return canonical;
}

/**
 * Subtitles of a video. Files arrive stored by the upload (`receiveMultipart`); they are checked here
 * by content, and removed again whenever the subtitle is not saved.
 */
export class SubtitleService {
  constructor(private readonly deps: MediaDeps) {}

  /** Where an uploaded subtitle file of the video is stored. */
  fileKey(video: VideoRow): string {
    return `${videoBlobPrefix(video.library_id, video.id)}/subtitles/${randomUUID()}`;
  }

  find(videoId: string, id: string): Promise<SubtitleRow | undefined> {
    return this.deps.videos.findSubtitle(videoId, id);
  }

  list(videoId: string, page: Page) {
    return this.deps.videos.listSubtitles(videoId, page);
  }

  /** A subtitle from a form of title, language and file; `not_found` when the video went meanwhile. */
  create(video: VideoRow, form: ReceivedForm): Promise<SubtitleOutcome<"created">> {
    return keepFileOnlyWhen(this.deps.removals, form, "created", async () => {
      const errors: FieldError[] = [];
      const title = checkTitle(form.fields.title, errors);
      const language = checkLanguage(form.fields.language, errors);
      let format: SubtitleFormat | "gone" | undefined;
      if (!form.file) errors.push(requiredField("file"));
      else format = await this.#checkFile(form.file.key, errors);
      if (format === "gone") return { outcome: "not_found" };
      if (errors.length > 0 || !title || !language || !form.file || !format) {
        return { outcome: "invalid", errors };
      }
      const now = nowIso(this.deps.clock);
      const subtitle: SubtitleRow = {
        id: randomUUID(),
        organization_id: video.organization_id,
        library_id: video.library_id,
        video_id: video.id,
        title,
        language,
        path: form.file.key,
        format,
        created_at: now,
        updated_at: now,
        deleted_at: null,
      };
      return this.deps.transact(async (trx) => {
        // Locked: a deletion of the video waits, or has happened (found missing, never a 500 from
        // the subtitle's reference to a row deleted meanwhile).
        if (!(await this.deps.videos.lock(trx, video.library_id, video.id))) return { outcome: "not_found" };
        await this.deps.videos.insertSubtitle(trx, subtitle);
        return { outcome: "created", subtitle };
      });
    });
  }

  /**
   * Changes what the form gives (at least one of title, language, file); a new file replaces the
   * old one, whose blob goes after commit.
   */
  update(videoId: string, id: string, form: ReceivedForm): Promise<SubtitleOutcome<"updated">> {
    const { transact, videos, removals, clock } = this.deps;
    return keepFileOnlyWhen(removals, form, "updated", async () => {
      const { title: givenTitle, language: givenLanguage } = form.fields;
      if (givenTitle === undefined && givenLanguage === undefined && !form.file) {
        return {
          outcome: "invalid",
          errors: [requiredField("title"), requiredField("language"), requiredField("file")],
        };
      }
      const errors: FieldError[] = [];
      const title = givenTitle === undefined ? undefined : checkTitle(givenTitle, errors);
      const language = givenLanguage === undefined ? undefined : checkLanguage(givenLanguage, errors);
      const format = form.file ? await this.#checkFile(form.file.key, errors) : undefined;
      if (format === "gone") return { outcome: "not_found" };
      if (errors.length > 0) return { outcome: "invalid", errors };
      const result = await transact(async (trx) => {
        const subtitle = await videos.lockSubtitle(trx, videoId, id);
        if (!subtitle) return undefined;
        const changes = {
          ...(title !== undefined ? { title } : {}),
          ...(language !== undefined ? { language } : {}),
          ...(form.file && format ? { path: form.file.key, format } : {}),
          updated_at: nowIso(clock),
        };
        const updated = await videos.updateSubtitle(trx, id, changes);
        if (!updated) return undefined;
        const replaced = form.file ? await removals.queue(trx, { keys: [subtitle.path] }) : undefined;
        return { subtitle: updated, replaced };
      });
      if (!result) return { outcome: "not_found" };
      await removals.carryOut(result.replaced);
      return { outcome: "updated", subtitle: result.subtitle };
    });
  }

  /** Marks the subtitle deleted (it then exists for no one) and removes its file. */
  async delete(videoId: string, id: string): Promise<{ outcome: "deleted" | "not_found" }> {
    const { transact, videos, removals, clock } = this.deps;
    const deleted = await transact(async (trx) => {
      const found = await videos.lockSubtitle(trx, videoId, id);
      if (!found) return undefined;
      await videos.updateSubtitle(trx, id, { deleted_at: nowIso(clock) });
      return { removal: await removals.queue(trx, { keys: [found.path] }) };
    });
    if (!deleted) return { outcome: "not_found" };
    await removals.carryOut(deleted.removal);
    return { outcome: "deleted" };
  }

  /** The file's format, undefined (with its error) when it is none, or "gone" with its video. */
  async #checkFile(key: string, errors: FieldError[]): Promise<SubtitleFormat | "gone" | undefined> {
    const { blobs, config } = this.deps;
    const head = await receivedHead(blobs, key, config.limits.subtitleBytes + 1);
    if (!head) return "gone";
    const format = detectSubtitleFormat(head);
    if (!format) {
      errors.push({
        field: "file",
        code: "validation_mimes",
        message: "The file field must be a WebVTT or SRT subtitle file.",
      });
    }
    return format;
  }
}
