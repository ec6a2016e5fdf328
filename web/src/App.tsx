import { lazy, type ReactNode, Suspense, useEffect } from "react";
import { BrowserRouter, Navigate, Route, Routes, useLocation } from "react-router";
import { messageOf } from "./api.ts";
import { Layout } from "./components/Layout.tsx";
import { Loading } from "./components/States.tsx";
import { ThemePicker } from "./components/ThemePicker.tsx";
import { InvitePage } from "./pages/invite/InvitePage.tsx";
import { SignInPage } from "./pages/sign-in/SignInPage.tsx";
import { SessionProvider, useSession } from "./session.tsx";

// Every page but sign-in is its own chunk, so the first page loads only the frame.
const KeysPage = lazy(() => import("./pages/keys/KeysPage.tsx").then((m) => ({ default: m.KeysPage })));
const LibrariesPage = lazy(() =>
  import("./pages/libraries/LibrariesPage.tsx").then((m) => ({ default: m.LibrariesPage })),
);
const LibraryPage = lazy(() =>
  import("./pages/libraries/LibraryPage.tsx").then((m) => ({ default: m.LibraryPage })),
);
const VideoPage = lazy(() =>
  import("./pages/libraries/VideoPage.tsx").then((m) => ({ default: m.VideoPage })),
);
const PlayersPage = lazy(() =>
  import("./pages/players/PlayersPage.tsx").then((m) => ({ default: m.PlayersPage })),
);
const WebhooksPage = lazy(() =>
  import("./pages/webhooks/WebhooksPage.tsx").then((m) => ({ default: m.WebhooksPage })),
);
const CdnPage = lazy(() => import("./pages/cdn/CdnPage.tsx").then((m) => ({ default: m.CdnPage })));
const CloudPage = lazy(() => import("./pages/cloud/CloudPage.tsx").then((m) => ({ default: m.CloudPage })));
const AccountPage = lazy(() =>
  import("./pages/account/AccountPage.tsx").then((m) => ({ default: m.AccountPage })),
);
const NotFoundPage = lazy(() =>
  import("./pages/not-found/NotFoundPage.tsx").then((m) => ({ default: m.NotFoundPage })),
);

function RequireSession({ children }: { children: ReactNode }) {
  const { session, ended, checkError, recheck } = useSession();
  const location = useLocation();
  if (session === undefined && checkError !== undefined) {
    return <SessionCheckFailed error={checkError} onRetry={recheck} />;
  }
  if (session === undefined) return <Loading what="Checking your session" />;
  if (session === null) {
    // The whole address (query and fragment too) is where sign-in returns to.
    const from = `${location.pathname}${location.search}${location.hash}`;
    return <Navigate to="/sign-in" replace state={{ from, ended }} />;
  }
  return children;
}

/** The session check failed for another reason than a 401: nobody knows yet whether one is signed in. */
function SessionCheckFailed({ error, onRetry }: { error: unknown; onRetry: () => void }) {
  useEffect(() => {
    document.title = "Cumulo console";
  }, []);
  return (
    <main id="main" className="sign-in">
      <div className="card">
        <h1>Cumulo console</h1>
        <div className="state state-error" role="alert" data-session-check-failed>
          <p>The console could not check whether you are signed in.</p>
          <p>{messageOf(error)}</p>
          <button type="button" className="primary" onClick={onRetry}>
            Try again
          </button>
        </div>
      </div>
      <ThemePicker />
    </main>
  );
}

export function App() {
  return (
    <SessionProvider>
      <BrowserRouter basename="/console">
        <Suspense fallback={<Loading />}>
          <Routes>
            <Route path="/sign-in" element={<SignInPage />} />
            <Route path="/invite" element={<InvitePage />} />
            <Route
              element={
                <RequireSession>
                  <Layout />
                </RequireSession>
              }
            >
              <Route index element={<Navigate to="/libraries" replace />} />
              <Route path="keys" element={<KeysPage />} />
              <Route path="libraries" element={<LibrariesPage />} />
              <Route path="libraries/:libraryId" element={<LibraryPage />} />
              <Route path="libraries/:libraryId/videos/:videoId" element={<VideoPage />} />
              <Route path="players" element={<PlayersPage />} />
              <Route path="webhooks" element={<WebhooksPage />} />
              <Route path="cdn/*" element={<CdnPage />} />
              <Route path="cloud/*" element={<CloudPage />} />
              <Route path="account" element={<AccountPage />} />
              <Route path="*" element={<NotFoundPage />} />
            </Route>
          </Routes>
        </Suspense>
      </BrowserRouter>
    </SessionProvider>
  );
}
