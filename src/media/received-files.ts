import type { FileRemovals } from "../blobs/removals.ts";
import type { BlobStore } from "../blobs/store.ts";
import type { FieldError } from "../http/errors.ts";
import { type ReceivedForm, readHead } from "./uploads.ts";

/** The error of a form field that was not sent. */
export const requiredField = (field: string): FieldError => ({
  field,
  code: "validation_required",
  message: `The ${field} field is required.`,
});

/** The error of a form field sent empty (or blank): as a JSON field's `minLength` reports it. */
export const emptyField = (field: string): FieldError => ({
  field,
  code: "validation_min",
  message: `The ${field} field must not be empty.`,
});

/**
 * Runs `work` on a form whose file is already stored; unless it ends in `kept`, the file is removed
 * again (also when `work` throws), durably, so a refused upload leaves nothing behind even when the
 * store fails at that moment.
 */
export async function keepFileOnlyWhen<T extends { outcome: string }>(
  removals: FileRemovals,
  form: ReceivedForm,
  kept: T["outcome"],
  work: () => Promise<T>,
): Promise<T> {
  let result: T | undefined;
  try {
    result = await work();
    return result;
  } finally {
    if (form.file && result?.outcome !== kept) await removals.removeNow({ keys: [form.file.key] });
  }
}

/**
 * The first bytes of a received file, or undefined when it is gone: the deletion of its video,
 * committed after the route found the video, removes every file under the video's prefix, this
 * one included, and the answer is then the 404 the video's absence gives.
 */
export async function receivedHead(
  blobs: BlobStore,
  key: string,
  maxBytes: number,
): Promise<Buffer | undefined> {
  try {
    return await readHead(blobs.open(key), maxBytes);
  } catch (error) {
    if (await blobs.exists(key)) throw error;
    return undefined;
  }
}
