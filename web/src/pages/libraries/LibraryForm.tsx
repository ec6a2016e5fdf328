import { useState } from "react";
import { Field, FormError, OtherErrors } from "../../components/Field.tsx";
import { submitting, useSubmit } from "../../form.ts";
import type { Library, LibraryCreate } from "./types.ts";

const USAGE = ["video_on_demand", "live_streaming", "mixed"] as const;
/** The API's usage values in words ("video_on_demand" means nothing to a reader). */
const USAGE_LABELS: Record<(typeof USAGE)[number], string> = {
  video_on_demand: "Video on demand",
  live_streaming: "Live streaming",
  mixed: "Both (video on demand and live streaming)",
};
const PRIVACY = ["public", "private", "unlisted", "restricted"] as const;

interface LibraryFormProps {
  /** The library being edited; a new one when absent. */
  library?: Library;
  submitLabel: string;
  onSave: (fields: LibraryCreate) => Promise<void>;
  onCancel: () => void;
}

/** Name, description, usage and default privacy of a library (usage only when creating). */
export function LibraryForm({ library, submitLabel, onSave, onCancel }: LibraryFormProps) {
  const [name, setName] = useState(library?.name ?? "");
  const [description, setDescription] = useState(library?.description ?? "");
  const [usage, setUsage] = useState<(typeof USAGE)[number]>("video_on_demand");
  const [privacy, setPrivacy] = useState<(typeof PRIVACY)[number]>(library?.default_privacy ?? "unlisted");
  const { submit, busy, errors, formError } = useSubmit(() =>
    onSave({
      name,
      description,
      default_privacy: privacy as (typeof PRIVACY)[number],
      ...(library ? {} : { usage_type: usage }),
    }),
  );
  return (
    <form noValidate onSubmit={submitting(submit)}>
      <Field label="Name" name="name" error={errors.name}>
        {(control) => <input {...control} value={name} onChange={(event) => setName(event.target.value)} />}
      </Field>
      <Field label="Description" name="description" error={errors.description}>
        {(control) => (
          <textarea
            {...control}
            rows={3}
            value={description}
            onChange={(event) => setDescription(event.target.value)}
          />
        )}
      </Field>
      {!library && (
        <Field label="Usage" name="usage_type" error={errors.usage_type}>
          {(control) => (
            <select
              {...control}
              value={usage}
              onChange={(event) => setUsage(event.target.value as (typeof USAGE)[number])}
            >
              {USAGE.map((value) => (
                <option key={value} value={value}>
                  {USAGE_LABELS[value]}
                </option>
              ))}
            </select>
          )}
        </Field>
      )}
      <Field
        label="Default privacy"
        name="default_privacy"
        error={errors.default_privacy}
        hint={
          library
            ? "Recorded on the library only: who may play its videos is its Security setting, Video privacy, on the library's page."
            : "Also who may play the library's videos at first; later that is changed in the library's Security settings."
        }
      >
        {(control) => (
          <select
            {...control}
            value={privacy}
            onChange={(event) => setPrivacy(event.target.value as (typeof PRIVACY)[number])}
          >
            {PRIVACY.map((value) => (
              <option key={value}>{value}</option>
            ))}
          </select>
        )}
      </Field>
      <OtherErrors errors={errors} shown={["name", "description", "usage_type", "default_privacy"]} />
      <FormError message={formError} />
      <div className="dialog-actions">
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" className="primary" disabled={busy}>
          {submitLabel}
        </button>
      </div>
    </form>
  );
}
