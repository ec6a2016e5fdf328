import type { ReactNode } from "react";
import { useSignedIn } from "../session.tsx";

/**
 * Shown above every page but the account's to a read-only user (the API refuses their changes with
 * 403), so that disabled forms and buttons read as what they are rather than as a fault.
 */
export const READ_ONLY_NOTICE = "Read-only access: changes are not allowed.";

export function ReadOnlyNotice() {
  return (
    <p className="read-only-notice" role="note" data-read-only-notice>
      {READ_ONLY_NOTICE}
    </p>
  );
}

/**
 * The fields of a form that changes something: all disabled for a read-only user, so nothing can be
 * typed that could never be saved. Lays out nothing itself (the fields stay the form's own items).
 */
export function WriteFields({ children }: { children: ReactNode }) {
  const { readOnly } = useSignedIn();
  return (
    <fieldset className="write-fields" disabled={readOnly}>
      {children}
    </fieldset>
  );
}
