import { useEffect, useId, useState } from "react";
import { api, call } from "../../api.ts";
import { useNowRenewedAt } from "../../clock.ts";
import { DateTime } from "../../components/DateTime.tsx";
import { Dialog } from "../../components/Dialog.tsx";
import { FormError, OtherErrors } from "../../components/Field.tsx";
import { submitting, useSubmit } from "../../form.ts";
import type { Endpoint } from "./WebhooksPage.tsx";

/** How long the replaced secret keeps signing deliveries (`previous_secret_expires_in_s`, at most 7 days). */
const OVERLAPS: { seconds: number; label: string }[] = [
  { seconds: 0, label: "No: it stops at once" },
  { seconds: 3600, label: "For 1 hour" },
  { seconds: 86_400, label: "For 24 hours" },
  { seconds: 604_800, label: "For 7 days" },
];
/**
 * The API's default: an overlap is opt-in (docs/decisions.md, Webhooks), since a receiver that
 * parses the header as one signature fails on two.
 */
const DEFAULT_OVERLAP = 0;

interface RotateDialogProps {
  libraryId: string;
  /** The endpoint whose secret is rotated, `undefined` when closed. */
  endpoint: Endpoint | undefined;
  onClose: () => void;
  /** The endpoint as rotated, with its new secret (answered this once). */
  onRotated: (endpoint: Endpoint & { secret: string }) => void;
}

/** Asks how long the current secret stays valid, then rotates the endpoint's signing secret. */
export function RotateDialog({ libraryId, endpoint, onClose, onRotated }: RotateDialogProps) {
  const hintId = useId();
  const [overlap, setOverlap] = useState(DEFAULT_OVERLAP);
  const previousUntil = endpoint?.previous_secret_expires_at;
  const now = useNowRenewedAt([previousUntil]);
  const { submit, busy, errors, formError, reset } = useSubmit(async () => {
    if (!endpoint) return;
    const rotated = await call(
      api.POST("/v1/media/libraries/{libraryId}/webhooks/{endpointId}/rotate-secret", {
        params: { path: { libraryId, endpointId: endpoint.id } },
        body: { previous_secret_expires_in_s: overlap },
      }),
    );
    onRotated(rotated.data);
  });
  useEffect(() => {
    if (endpoint === undefined) return;
    reset();
    setOverlap(DEFAULT_OVERLAP);
  }, [endpoint, reset]);

  return (
    <Dialog
      open={endpoint !== undefined}
      title={`Rotate secret of ${endpoint?.name ?? ""}`}
      onClose={onClose}
    >
      <form noValidate onSubmit={submitting(submit)}>
        <p>The endpoint gets a new signing secret, shown once.</p>
        {previousUntil && Date.parse(previousUntil) > now && (
          // The API keeps one previous secret: the one still in its overlap is replaced.
          <p className="warning">
            The secret replaced last time, accepted until <DateTime value={previousUntil} />, stops at once.
          </p>
        )}
        <fieldset
          className={errors.previous_secret_expires_in_s ? "field field-invalid" : "field"}
          aria-describedby={hintId}
        >
          <legend>Keep the current secret valid</legend>
          {OVERLAPS.map((option) => (
            <label key={option.seconds} className="field-inline">
              <input
                type="radio"
                name="previous_secret_expires_in_s"
                value={option.seconds}
                checked={overlap === option.seconds}
                onChange={() => setOverlap(option.seconds)}
              />
              {option.label}
            </label>
          ))}
          <small id={hintId} className="field-hint">
            Until then deliveries carry both signatures, so receivers can switch without rejecting one.
          </small>
          {errors.previous_secret_expires_in_s && (
            <small className="field-error" data-field-error="previous_secret_expires_in_s">
              {errors.previous_secret_expires_in_s}
            </small>
          )}
        </fieldset>
        <OtherErrors errors={errors} shown={["previous_secret_expires_in_s"]} />
        <FormError message={formError} />
        <div className="dialog-actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="primary" disabled={busy}>
            Rotate secret
          </button>
        </div>
      </form>
    </Dialog>
  );
}
