import { type FormEvent, useCallback, useRef, useState } from "react";
import { ApiFailure, type FieldErrors, isMissing, messageOf } from "./api.ts";

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
        if (Object.keys(fields).length === 0) setFormError(failureInWords(error));
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

/**
 * A form's failure as said beside it. A 404 there means that what the form changes is gone (removed
 * in another tab, or by someone else): the API's bare "Resource not found" said neither that nor what
 * to do.
 */
function failureInWords(error: unknown): string {
  if (isMissing(error)) {
    return `${error.message}: it may have been removed, in another tab or by someone else. Reload the page to see what is there now.`;
  }
  return messageOf(error);
}

/**
 * A form's submit handler: the page stays put (no browser submission) and the action runs. When the
 * API refused fields, the focus moves to the first of them, so a keyboard or screen-reader user lands
 * on what to correct instead of staying on the submit button below it.
 */
export const submitting =
  (submit: () => Promise<void>) =>
  (event: FormEvent<HTMLFormElement>): void => {
    event.preventDefault();
    const form = event.currentTarget;
    // Where the focus was: the submit button, which is disabled while the request runs and so drops it.
    const from = document.activeElement;
    void submit().then(() =>
      // After React has drawn the answer's errors: its render was queued before this timer.
      setTimeout(() => {
        const invalid = form.querySelector<HTMLElement>('[aria-invalid="true"]');
        // Unless the person went elsewhere meanwhile (the busy, disabled button leaves the focus on body).
        const active = document.activeElement;
        const stayed = active === null || active === document.body || form.contains(active);
        if (!form.isConnected || !stayed) return;
        if (invalid) invalid.focus();
        // A failure of the whole form (its message is announced): the focus back where it was.
        else if (
          (active === null || active === document.body) &&
          from instanceof HTMLElement &&
          form.contains(from)
        )
          from.focus();
      }, 0),
    );
  };

/**
 * An action a button starts, run one at a time: a second click, a double-click's or a repeated
 * Enter, does nothing while the first runs (a double-click made two S3 key pairs). The button is not
 * disabled meanwhile, so it keeps the focus; `busy` is for its `aria-busy`.
 */
export function useOneAtATime<A extends unknown[]>(action: (...args: A) => Promise<void>) {
  const running = useRef(false);
  const [busy, setBusy] = useState(false);
  const run = useCallback(
    async (...args: A) => {
      if (running.current) return;
      running.current = true;
      setBusy(true);
      try {
        await action(...args);
      } finally {
        running.current = false;
        setBusy(false);
      }
    },
    [action],
  );
  return { run, busy };
}

/**
 * The items of a list typed one a line (and, with `withinLine`, several on a line apart by it), each
 * with the line it was typed on; blank ones left out. The API names a refused item by its place in
 * the list sent (`paths.2`), which is not its line once a blank line or a comma came before it.
 */
export function itemsByLine(text: string, withinLine?: RegExp): { item: string; line: number }[] {
  return text
    .split("\n")
    .flatMap((line, index) =>
      (withinLine ? line.split(withinLine) : [line])
        .map((item) => ({ item: item.trim(), line: index + 1 }))
        .filter(({ item }) => item !== ""),
    );
}
