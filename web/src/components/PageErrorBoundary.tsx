import { Component, type ErrorInfo, type ReactNode } from "react";
import { PageHeader } from "./Layout.tsx";

interface Props {
  /** The address shown: when it changes (the person went elsewhere) a page that failed is tried again. */
  resetKey: string;
  children: ReactNode;
}

interface State {
  error: unknown;
}

/**
 * A page's code is its own chunk (`React.lazy`): when it cannot be loaded (the server is unreachable,
 * or a new deploy replaced the chunk names this tab knows), or the page throws while drawing, the frame
 * stays and says so, with a full reload (which fetches the new `index.html` and its chunks).
 */
export class PageErrorBoundary extends Component<Props, State> {
  state: State = { error: undefined };

  static getDerivedStateFromError(error: unknown): State {
    return { error: error ?? new Error("Unknown error") };
  }

  componentDidUpdate(previous: Props) {
    // Another address: the page there gets its chance.
    if (this.state.error !== undefined && previous.resetKey !== this.props.resetKey) {
      this.setState({ error: undefined });
    }
  }

  componentDidCatch(error: unknown, info: ErrorInfo) {
    console.error("The page failed:", error, info.componentStack);
  }

  render() {
    if (this.state.error === undefined) return this.props.children;
    return <PageFailed error={this.state.error} />;
  }
}

/** A dynamic import that failed: the chunk was not fetched (network, or a name no longer deployed). */
const isChunkFailure = (error: unknown): boolean =>
  error instanceof Error &&
  /dynamically imported module|importing a module script failed|error loading dynamically|Failed to fetch/i.test(
    error.message,
  );

function PageFailed({ error }: { error: unknown }) {
  return (
    <>
      <PageHeader title="This page could not be loaded" />
      <div className="state state-error" role="alert" data-page-failed>
        <p>
          {isChunkFailure(error)
            ? "The console could not fetch this page from the server: the server may be unreachable, or the console was updated since this tab opened."
            : "Something went wrong while showing this page."}{" "}
          Reloading usually helps; other pages of the menu may still work.
        </p>
        <button type="button" className="primary" onClick={() => window.location.reload()}>
          Reload
        </button>
      </div>
    </>
  );
}
