import type { FileRemovals } from "../blobs/removals.ts";
import type { FieldError } from "../http/errors.ts";
import type { ReceivedForm } from "./uploads.ts";

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
