import { useState } from "react";
import { Field, FormError, OtherErrors } from "../../components/Field.tsx";
import { submitting, useSubmit } from "../../form.ts";
import type { Player } from "../libraries/types.ts";

type Theme = Player["theme"];
type Control = Theme["controls"][number];

const CONTROLS: Control[] = [
  "play",
  "progress",
  "current-time",
  "duration",
  "mute",
  "volume",
  "captions",
  "settings",
  "pip",
  "airplay",
  "fullscreen",
];
const DEFAULT_THEME: Theme = {
  primary_color: "#3b82f6",
  background_color: "#000000",
  text_color: "#ffffff",
  controls: ["play", "progress", "current-time", "mute", "volume", "captions", "settings", "fullscreen"],
  autoplay: false,
  loop: false,
};

/** What a viewer would see: the player's colours and its control bar. */
export function PlayerPreview({ theme, small = false }: { theme: Theme; small?: boolean }) {
  return (
    <div
      className={small ? "player-preview small" : "player-preview"}
      role="img"
      aria-label={`Player preview: ${theme.controls.join(", ") || "no controls"}`}
      style={{ background: theme.background_color, color: theme.text_color }}
    >
      {!small && <span className="preview-title">Preview</span>}
      <div className="preview-bar" style={{ borderTopColor: theme.primary_color }}>
        {theme.controls.includes("play") && <span style={{ color: theme.primary_color }}>▶</span>}
        {theme.controls.includes("progress") && (
          <span className="preview-progress" style={{ background: theme.primary_color }} />
        )}
        {!small &&
          theme.controls.filter((control) => control !== "play" && control !== "progress").join(" · ")}
      </div>
    </div>
  );
}

interface PlayerFormProps {
  player?: Player;
  onSave: (fields: { name: string; theme: Theme }) => Promise<void>;
  onCancel: () => void;
}

export function PlayerForm({ player, onSave, onCancel }: PlayerFormProps) {
  const [name, setName] = useState(player?.name ?? "");
  const [theme, setTheme] = useState<Theme>(player?.theme ?? DEFAULT_THEME);
  const { submit, busy, errors, formError } = useSubmit(() => onSave({ name, theme }));
  const color = (key: "primary_color" | "background_color" | "text_color", label: string) => (
    <Field label={label} name={`theme.${key}`} error={errors[`theme.${key}`]}>
      {(control) => (
        <input
          {...control}
          type="color"
          value={theme[key]}
          onChange={(event) => setTheme({ ...theme, [key]: event.target.value })}
        />
      )}
    </Field>
  );
  return (
    <form noValidate onSubmit={submitting(submit)}>
      <Field label="Name" name="name" error={errors.name}>
        {(control) => <input {...control} value={name} onChange={(event) => setName(event.target.value)} />}
      </Field>
      <div className="grid-3">
        {color("primary_color", "Primary colour")}
        {color("background_color", "Background")}
        {color("text_color", "Text")}
      </div>
      <fieldset>
        <legend>Controls</legend>
        <div className="checkbox-grid">
          {CONTROLS.map((control) => (
            <label key={control}>
              <input
                type="checkbox"
                checked={theme.controls.includes(control)}
                onChange={(event) =>
                  setTheme({
                    ...theme,
                    controls: event.target.checked
                      ? CONTROLS.filter((item) => item === control || theme.controls.includes(item))
                      : theme.controls.filter((item) => item !== control),
                  })
                }
              />{" "}
              {control}
            </label>
          ))}
        </div>
      </fieldset>
      <label className="field field-inline">
        <input
          type="checkbox"
          checked={theme.autoplay}
          onChange={(event) => setTheme({ ...theme, autoplay: event.target.checked })}
        />{" "}
        Autoplay (muted)
      </label>
      <label className="field field-inline">
        <input
          type="checkbox"
          checked={theme.loop}
          onChange={(event) => setTheme({ ...theme, loop: event.target.checked })}
        />{" "}
        Loop
      </label>
      <PlayerPreview theme={theme} />
      <OtherErrors
        errors={errors}
        shown={["name", "theme.primary_color", "theme.background_color", "theme.text_color"]}
      />
      <FormError message={formError} />
      <div className="dialog-actions">
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" className="primary" disabled={busy}>
          Save player
        </button>
      </div>
    </form>
  );
}
