import type { paths } from "@cumulo/client";
import { useEffect, useState } from "react";
import { api, call } from "../../api.ts";
import { Dialog } from "../../components/Dialog.tsx";
import { Field, FormError, OtherErrors } from "../../components/Field.tsx";
import { submitting, useSubmit } from "../../form.ts";
import type { Endpoint } from "./WebhooksPage.tsx";

type EventName =
  paths["/v1/media/libraries/{libraryId}/webhooks"]["post"]["requestBody"]["content"]["application/json"]["events"][number];

/** Every event an endpoint can ask for; `*` means all of them, also those added later. */
const EVENTS: { name: EventName; label: string }[] = [
  { name: "*", label: "All events" },
  { name: "created", label: "Created" },
  { name: "uploading", label: "Uploading" },
  { name: "processing", label: "Processing" },
  { name: "transcoding", label: "Transcoding" },
  { name: "packaging", label: "Packaging" },
  { name: "ready", label: "Ready" },
  { name: "failed", label: "Failed" },
  { name: "deleted", label: "Deleted" },
];

/** An endpoint's events in the dialog's words: "All events", or "Ready, Failed" (never the API's `*`). */
export const eventsInWords = (events: readonly string[]): string =>
  events.includes("*")
    ? "All events"
    : events.map((name) => EVENTS.find((option) => option.name === name)?.label ?? name).join(", ");

interface EndpointDialogProps {
  libraryId: string;
  /** The endpoint being edited, `"new"` to add one, `undefined` when closed. */
  endpoint: Endpoint | "new" | undefined;
  onClose: () => void;
  onSaved: (endpoint: Endpoint, created: boolean) => void;
}

export function EndpointDialog({ libraryId, endpoint, onClose, onSaved }: EndpointDialogProps) {
  const existing = endpoint === "new" ? undefined : endpoint;
  const [name, setName] = useState("");
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<EventName[]>(["*"]);
  const [active, setActive] = useState(true);
  const { submit, busy, errors, formError, reset } = useSubmit(async () => {
    const body = { name, url, events, is_active: active };
    const saved = existing
      ? await call(
          api.PATCH("/v1/media/libraries/{libraryId}/webhooks/{endpointId}", {
            params: { path: { libraryId, endpointId: existing.id } },
            body,
          }),
        )
      : await call(
          api.POST("/v1/media/libraries/{libraryId}/webhooks", { params: { path: { libraryId } }, body }),
        );
    onSaved(saved.data, !existing);
  });
  useEffect(() => {
    if (endpoint === undefined) return;
    reset();
    setName(existing?.name ?? "");
    setUrl(existing?.url ?? "");
    setEvents((existing?.events as EventName[] | undefined) ?? ["*"]);
    setActive(existing?.is_active ?? true);
  }, [endpoint, existing, reset]);

  const toggle = (event: EventName, checked: boolean) =>
    setEvents((current) => (checked ? [...current, event] : current.filter((name) => name !== event)));

  return (
    <Dialog
      open={endpoint !== undefined}
      title={existing ? `Edit ${existing.name}` : "Add endpoint"}
      onClose={onClose}
    >
      <form noValidate onSubmit={submitting(submit)}>
        <Field label="Name" name="name" error={errors.name}>
          {(control) => (
            <input {...control} required value={name} onChange={(event) => setName(event.target.value)} />
          )}
        </Field>
        <Field
          label="URL"
          name="url"
          error={errors.url}
          hint="Where Cumulo POSTs each event, signed with the endpoint's secret (https://…)."
        >
          {(control) => (
            <input
              {...control}
              type="url"
              required
              inputMode="url"
              value={url}
              onChange={(event) => setUrl(event.target.value)}
            />
          )}
        </Field>
        <fieldset
          className={errors.events ? "field field-invalid" : "field"}
          aria-describedby={errors.events ? "endpoint-events-error" : undefined}
        >
          <legend>Events</legend>
          <div className="checkbox-grid">
            {EVENTS.map((option) => (
              <label key={option.name} className="field-inline">
                <input
                  type="checkbox"
                  name="events"
                  value={option.name}
                  checked={events.includes(option.name)}
                  // Refused as a group: each box says so, and the form's focus goes to the first.
                  aria-invalid={errors.events ? true : undefined}
                  aria-describedby={errors.events ? "endpoint-events-error" : undefined}
                  onChange={(event) => toggle(option.name, event.target.checked)}
                />
                {option.label}
              </label>
            ))}
          </div>
          {errors.events && (
            <small id="endpoint-events-error" className="field-error" data-field-error="events">
              {errors.events}
            </small>
          )}
        </fieldset>
        <label className="field field-inline">
          <input
            type="checkbox"
            name="is_active"
            checked={active}
            onChange={(event) => setActive(event.target.checked)}
          />
          Active (deliver events to this endpoint)
        </label>
        <OtherErrors errors={errors} shown={["name", "url", "events", "is_active"]} />
        <FormError message={formError} />
        <div className="dialog-actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="primary" disabled={busy}>
            {existing ? "Save" : "Add endpoint"}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
