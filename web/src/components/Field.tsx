import { type ReactNode, useId } from "react";

export interface FieldControlProps {
  id: string;
  name: string;
  "aria-invalid": boolean;
  "aria-describedby": string | undefined;
}

interface FieldProps {
  label: string;
  /** The field's name as the API reports it in validation errors (`referrers.values.2`). */
  name: string;
  /** The message of the API for this field, shown beside it. */
  error?: string | undefined;
  hint?: string;
  children: (control: FieldControlProps) => ReactNode;
}

/** A labelled form control with its hint and the API's field error beside it. */
export function Field({ label, name, error, hint, children }: FieldProps) {
  const id = useId();
  const hintId = hint ? `${id}-hint` : undefined;
  const errorId = error ? `${id}-error` : undefined;
  const describedBy = [hintId, errorId].filter(Boolean).join(" ") || undefined;
  return (
    <div className={error ? "field field-invalid" : "field"}>
      <label htmlFor={id}>{label}</label>
      {children({ id, name, "aria-invalid": Boolean(error), "aria-describedby": describedBy })}
      {hint && (
        <small id={hintId} className="field-hint">
          {hint}
        </small>
      )}
      {error && (
        <small id={errorId} className="field-error" data-field-error={name}>
          {error}
        </small>
      )}
    </div>
  );
}

/** Field errors the form shows nowhere else (a field the form has no control for), as one list. */
export function OtherErrors({ errors, shown }: { errors: Record<string, string>; shown: string[] }) {
  const rest = Object.entries(errors).filter(([field]) => !shown.includes(field));
  if (rest.length === 0) return null;
  return (
    <ul className="form-errors" role="alert">
      {rest.map(([field, message]) => (
        <li key={field}>
          <code>{field}</code>: {message}
        </li>
      ))}
    </ul>
  );
}

/** A failure that belongs to no field, announced to screen readers. */
export function FormError({ message }: { message: string | undefined }) {
  if (!message) return null;
  return (
    <p className="field-error" role="alert">
      {message}
    </p>
  );
}

interface PasswordFieldProps {
  label: string;
  name: string;
  error?: string | undefined;
  hint?: string;
  /** Tells password managers whether to fill a saved password or offer a new one. */
  autoComplete: "current-password" | "new-password";
  minLength?: number;
  value: string;
  onChange: (value: string) => void;
}

/** A required password input in a `Field`. */
export function PasswordField({ autoComplete, minLength, value, onChange, ...field }: PasswordFieldProps) {
  return (
    <Field {...field}>
      {(control) => (
        <input
          {...control}
          type="password"
          autoComplete={autoComplete}
          required
          minLength={minLength}
          value={value}
          onChange={(event) => onChange(event.target.value)}
        />
      )}
    </Field>
  );
}

interface OptionalNameFieldProps {
  name: string;
  error?: string | undefined;
  /** What the resource is called without a name. */
  hint: string;
  value: string;
  onChange: (value: string) => void;
}

/** A resource's name that the API does not require (at most 255 characters), marked as optional. */
export function OptionalNameField({ value, onChange, ...field }: OptionalNameFieldProps) {
  return (
    <Field label="Name" {...field}>
      {(control) => (
        <input
          {...control}
          placeholder="Optional"
          maxLength={255}
          value={value}
          onChange={(event) => onChange(event.target.value)}
        />
      )}
    </Field>
  );
}
