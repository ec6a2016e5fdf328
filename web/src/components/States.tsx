import type { ReactNode } from "react";
import { isMissing, messageOf } from "../api.ts";
import { PageHeader } from "./Layout.tsx";

export function Loading({ what = "Loading" }: { what?: string }) {
  return (
    <p className="state state-loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      {what}…
    </p>
  );
}

/** A page whose subject does not exist: says so as the page's heading, with a way on. */
export function Missing({ title, children }: { title: string; children: ReactNode }) {
  return (
    <>
      <PageHeader title={title} />
      <p>{children}</p>
    </>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="state state-empty">{children}</div>;
}

export function ErrorState({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  return (
    <div className="state state-error" role="alert">
      <p>{messageOf(error)}</p>
      {onRetry && !isMissing(error) && (
        <button type="button" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}
