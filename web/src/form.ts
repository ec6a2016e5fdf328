import { type FormEvent, useCallback, useState } from "react";
import { ApiFailure, type FieldErrors, messageOf } from "./api.ts";

/**
 * A form's submission: `errors` holds the API's field errors (shown beside their fields),
 * `formError` the message of any other failure.
 */
export function useSubmit<A extends unknown[]>(action: (...args: A) => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [formError, setFormError] = useState<string>();
  const submit = useCallback(
    async (...args: A) => {
      setBusy(true);
      setErrors({});
      setFormError(undefined);
      try {
        await action(...args);
      } catch (error) {
        const fields = error instanceof ApiFailure ? error.fieldErrors : {};
        setErrors(fields);
        if (Object.keys(fields).length === 0) setFormError(messageOf(error));
      } finally {
        setBusy(false);
      }
    },
    [action],
  );
  const reset = useCallback(() => {
    setErrors({});
    setFormError(undefined);
  }, []);
  return { submit, busy, errors, formError, reset };
}

/** A form's submit handler: the page stays put (no browser submission) and the action runs. */
export const submitting =
  (submit: () => Promise<void>) =>
  (event: FormEvent): void => {
    event.preventDefault();
    void submit();
  };
