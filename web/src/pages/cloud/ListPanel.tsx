import type { ReactNode } from "react";
import { Empty, ErrorState, Loading } from "../../components/States.tsx";
import type { Loaded } from "../../load.ts";

interface ListPanelProps<T> {
  title: string;
  /** The list as loaded; cloud routes answer bare arrays. */
  list: Loaded<T[]> & { reload: () => void };
  empty: string;
  actions?: ReactNode;
  children: (rows: T[]) => ReactNode;
}

/** One cloud resource kind: its heading and actions, then loading, error, empty or the rows. */
export function ListPanel<T>({ title, list, empty, actions, children }: ListPanelProps<T>) {
  const id = `cloud-${title.toLowerCase().replaceAll(" ", "-")}`;
  return (
    <section className="panel" aria-labelledby={id}>
      <div className="page-header">
        <h2 id={id}>{title}</h2>
        {actions && <div className="page-actions">{actions}</div>}
      </div>
      {list.state === "loading" && <Loading what={`Loading ${title.toLowerCase()}`} />}
      {list.state === "error" && <ErrorState error={list.error} onRetry={list.reload} />}
      {list.state === "ready" &&
        (list.data.length === 0 ? (
          <Empty>
            <p>{empty}</p>
          </Empty>
        ) : (
          children(list.data)
        ))}
    </section>
  );
}

/** The form's "something went wrong" line, for failures that name no field. */
export function FormError({ message }: { message: string | undefined }) {
  if (!message) return null;
  return (
    <p className="field-error" role="alert">
      {message}
    </p>
  );
}
