import { type ReactNode, type RefObject, Suspense, useEffect, useRef, useState } from "react";
import { NavLink, Outlet, useLocation, useNavigate } from "react-router";
import { messageOf } from "../api.ts";
import { useSession, useSignedIn } from "../session.tsx";
import { LivestreamHealth } from "./LivestreamHealth.tsx";
import { PageErrorBoundary } from "./PageErrorBoundary.tsx";
import { ReadOnlyNotice } from "./ReadOnly.tsx";
import { Loading } from "./States.tsx";
import { ThemePicker } from "./ThemePicker.tsx";

export const NAVIGATION = [
  { to: "/keys", label: "API keys" },
  { to: "/libraries", label: "Libraries" },
  { to: "/players", label: "Players" },
  { to: "/webhooks", label: "Webhooks" },
  { to: "/cdn", label: "CDN" },
  { to: "/cloud", label: "Cloud" },
] as const;

/** The signed-in frame: header with organization, livestream health and sign-out; navigation; the page. */
export function Layout() {
  const session = useSignedIn();
  const { signOut } = useSession();
  const navigate = useNavigate();
  const location = useLocation();
  const [menuOpen, setMenuOpen] = useState(false);
  const [signOutError, setSignOutError] = useState<string>();
  const main = useRef<HTMLElement>(null);
  const menuWasOpen = useRef(menuOpen);
  menuWasOpen.current = menuOpen;
  // A page chosen in the navigation takes the focus, so a screen reader announces it and the next
  // Tab goes into it: on a phone the chosen link is hidden with the closing menu (which dropped the
  // focus to the document), and on a wider screen the focus stayed on the link with nothing said
  // (QA of 5 December, session 43).
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs on navigation by design
  useEffect(() => {
    const inNavigation = document.getElementById("main-nav")?.contains(document.activeElement);
    const inMenu =
      menuWasOpen.current && document.getElementById("session-bar")?.contains(document.activeElement);
    if (inNavigation || inMenu) main.current?.focus({ preventScroll: true });
    setMenuOpen(false);
  }, [location.pathname]);
  // Escape closes the open menu and puts the focus back on its button.
  const menuButton = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (!menuOpen) return;
    const onKey = (event: KeyboardEvent) => {
      if (event.key !== "Escape" || event.defaultPrevented) return;
      setMenuOpen(false);
      menuButton.current?.focus();
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [menuOpen]);
  useFocusKeptInPage(main);

  return (
    <div className="frame">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <button
          ref={menuButton}
          type="button"
          className="menu-button"
          aria-expanded={menuOpen}
          aria-controls="main-nav session-bar"
          onClick={() => setMenuOpen((open) => !open)}
        >
          Menu
        </button>
        <span className="brand">Cumulo</span>
        <span className="org" title={`Organization: ${session.organization.name}`}>
          {session.organization.name}
        </span>
        {/* On a phone the bar keeps one row: this part opens with the menu, above the navigation. */}
        <div id="session-bar" className={menuOpen ? "session-bar open" : "session-bar"}>
          <LivestreamHealth />
          <span className="user">
            <NavLink
              to="/account"
              className="account-link"
              title={`${session.user.email}: your account, change password`}
            >
              {session.user.email}
            </NavLink>
            {session.readOnly && <span className="badge">read-only</span>}
          </span>
          <ThemePicker />
          <button
            type="button"
            onClick={async () => {
              try {
                await signOut();
                navigate("/sign-in");
              } catch (error) {
                setSignOutError(messageOf(error));
              }
            }}
          >
            Sign out
          </button>
          {signOutError && (
            <span className="field-error" role="alert">
              {signOutError}
            </span>
          )}
        </div>
      </header>
      <nav id="main-nav" className={menuOpen ? "sidenav open" : "sidenav"} aria-label="Main">
        <ul>
          {NAVIGATION.map((item) => (
            <li key={item.to}>
              <NavLink to={item.to}>{item.label}</NavLink>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main" tabIndex={-1} ref={main}>
        {session.readOnly && location.pathname !== "/account" && <ReadOnlyNotice />}
        {/* A page that cannot be loaded or drawn fails inside the frame, not the whole console. */}
        <PageErrorBoundary resetKey={location.pathname}>
          <Suspense fallback={<Loading />}>
            <Outlet />
          </Suspense>
        </PageErrorBoundary>
      </main>
    </div>
  );
}

/**
 * When the focused element leaves the page and nothing took its place (the last row of a table
 * deleted, the table replaced by its empty state), the browser drops the focus to the document and a
 * screen reader loses the person's place. The focus goes to the page's `main` instead. A table with
 * rows left focuses the row in the removed one's place itself (DataTable); an open dialog gives the
 * focus back to its opener, so nothing is done while one is open.
 */
function useFocusKeptInPage(main: RefObject<HTMLElement | null>) {
  useEffect(() => {
    const element = main.current;
    if (!element) return;
    let focused: Element | null = null;
    const onFocusIn = (event: FocusEvent) => {
      focused = event.target instanceof Element ? event.target : null;
    };
    const observer = new MutationObserver(() => {
      const lost = document.activeElement === null || document.activeElement === document.body;
      if (!focused || focused.isConnected || !lost || document.querySelector("dialog[open]")) return;
      focused = null;
      element.focus({ preventScroll: true });
    });
    document.addEventListener("focusin", onFocusIn);
    observer.observe(element, { childList: true, subtree: true });
    return () => {
      document.removeEventListener("focusin", onFocusIn);
      observer.disconnect();
    };
  }, [main]);
}

/** A page's title (also the document title) and its main actions. */
export function PageHeader({ title, children }: { title: string; children?: ReactNode }) {
  useEffect(() => {
    document.title = `${title} · Cumulo console`;
  }, [title]);
  return (
    <div className="page-header">
      <h1>{title}</h1>
      {children && <div className="page-actions">{children}</div>}
    </div>
  );
}
