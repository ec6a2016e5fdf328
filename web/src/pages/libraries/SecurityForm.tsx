import { useCallback, useEffect, useRef, useState } from "react";
import { api, call, errorsOfLines } from "../../api.ts";
import { Field, FormError, OtherErrors } from "../../components/Field.tsx";
import { WriteFields } from "../../components/ReadOnly.tsx";
import { ErrorState, Loading } from "../../components/States.tsx";
import { itemsByLine, submitting, useSubmit } from "../../form.ts";
import { useLoad } from "../../load.ts";
import { useSignedIn } from "../../session.tsx";
import type { Security } from "./types.ts";

type Action = "allow" | "deny";
type VideoPrivacy = "public" | "private" | "restricted";
const PRIVACY: VideoPrivacy[] = ["public", "private", "restricted"];

interface Rule {
  action: Action;
  values: string;
  enabled: boolean;
}

const toLines = (values: string[]) => values.join("\n");
/** Values typed one a line or apart by commas, with the line each came from. */
const valuesOf = (text: string) => itemsByLine(text, /,/);

/** Referrer and country rules and the privacy of the library's videos; `onSaved` after each save. */
export function SecurityForm({ libraryId, onSaved }: { libraryId: string; onSaved?: () => void }) {
  const { readOnly } = useSignedIn();
  const security = useLoad(
    () => call(api.GET("/v1/media/libraries/{libraryId}/security", { params: { path: { libraryId } } })),
    libraryId,
  );
  const [referrers, setReferrers] = useState<Rule>({ action: "allow", values: "", enabled: false });
  const [countries, setCountries] = useState<Rule>({ action: "deny", values: "", enabled: false });
  const [privacy, setPrivacy] = useState<string>("public");
  // The stored privacy can be a value this form cannot send back (a library's `unlisted`): it is
  // shown as it is and sent only when changed. "Stored" is what the server last answered: the
  // settings read when the page opened, then the answer of each save.
  const [stored, setStored] = useState<Security>();
  const [saved, setSaved] = useState(false);
  const show = useCallback((settings: Security) => {
    const { whitelist_referrers: r, blocked_countries: c, video_privacy } = settings;
    setStored(settings);
    setReferrers({ action: r.action, values: toLines(r.values), enabled: r.enabled });
    setCountries({ action: c.action, values: toLines(c.values), enabled: c.enabled });
    setPrivacy(video_privacy);
  }, []);
  useEffect(() => {
    if (security.state === "ready") show(security.data.data);
  }, [security.state, security.data, show]);
  const storedPrivacy = stored?.video_privacy;
  // The line of its text area each value sent came from, to name a refused one by its line.
  const sentFromLines = useRef({ referrers: [] as number[], countries: [] as number[] });
  const { submit, busy, errors, formError } = useSubmit(async () => {
    setSaved(false);
    const referrerValues = valuesOf(referrers.values);
    const countryValues = valuesOf(countries.values);
    sentFromLines.current = {
      referrers: referrerValues.map(({ line }) => line),
      countries: countryValues.map(({ line }) => line),
    };
    const answer = await call(
      api.PUT("/v1/media/libraries/{libraryId}/security", {
        params: { path: { libraryId } },
        body: {
          referrers: { ...referrers, values: referrerValues.map(({ item }) => item) },
          countries: { ...countries, values: countryValues.map(({ item }) => item) },
          ...(privacy !== storedPrivacy ? { video_privacy: privacy as VideoPrivacy } : {}),
        },
      }),
    );
    // What the form shows from now on is what the server saved, and the next save compares with it.
    show(answer.data);
    setSaved(true);
    onSaved?.();
  });
  if (security.state === "loading") return <Loading what="Loading security settings" />;
  if (security.state === "error") return <ErrorState error={security.error} onRetry={security.reload} />;

  const rule = (name: "referrers" | "countries", value: Rule, set: (rule: Rule) => void, hint: string) => (
    <fieldset>
      <legend>{name === "referrers" ? "Referrers" : "Countries"}</legend>
      {/* A field like the others: it sat right on the Action label, without a field's margin. */}
      <label className="field field-inline">
        <input
          type="checkbox"
          checked={value.enabled}
          onChange={(event) => set({ ...value, enabled: event.target.checked })}
        />
        Enforce this rule
      </label>
      <Field label="Action" name={`${name}.action`} error={errors[`${name}.action`]}>
        {(control) => (
          <select
            {...control}
            value={value.action}
            onChange={(event) => set({ ...value, action: event.target.value as Action })}
          >
            <option value="allow">allow only these</option>
            <option value="deny">deny these</option>
          </select>
        )}
      </Field>
      <Field
        label="Values"
        name={`${name}.values`}
        hint={hint}
        error={errorsOfLines(
          errors,
          `${name}.values`,
          (index) => sentFromLines.current[name][index] ?? index + 1,
        )}
      >
        {(control) => (
          <textarea
            {...control}
            rows={3}
            value={value.values}
            onChange={(event) => set({ ...value, values: event.target.value })}
          />
        )}
      </Field>
    </fieldset>
  );

  return (
    <form noValidate onSubmit={submitting(submit)}>
      <WriteFields>
        <div className="grid-2">
          {rule(
            "referrers",
            referrers,
            setReferrers,
            "One host name per line, e.g. example.com or *.example.com",
          )}
          {rule("countries", countries, setCountries, "One ISO country code per line, e.g. DE")}
        </div>
        <Field label="Video privacy" name="video_privacy" error={errors.video_privacy}>
          {(control) => (
            <select {...control} value={privacy} onChange={(event) => setPrivacy(event.target.value)}>
              {storedPrivacy && !PRIVACY.includes(storedPrivacy as VideoPrivacy) && (
                <option value={storedPrivacy}>{storedPrivacy}</option>
              )}
              <option value="public">public</option>
              <option value="restricted">restricted</option>
              <option value="private">private (a playback token is needed)</option>
            </select>
          )}
        </Field>
      </WriteFields>
      <OtherErrors
        errors={errors}
        shown={Object.keys(errors).filter((field) =>
          /^(referrers|countries)\.(action|values)|^video_privacy$/.test(field),
        )}
      />
      <FormError message={formError} />
      {saved && <p role="status">Security settings saved.</p>}
      <button type="submit" className="primary" disabled={readOnly || busy}>
        Save security settings
      </button>
    </form>
  );
}
