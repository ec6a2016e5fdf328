import { useEffect, useRef } from "react";
import { NavLink, useLocation } from "react-router";

interface SectionTab {
  /** The section's address; it is the current tab only at exactly this address. */
  to: string;
  label: string;
}

/**
 * The tabs of a page's sections, each a link to its own address. They stay one row: on a screen too
 * narrow for all of them the row scrolls sideways (it used to wrap into three rows on a phone), and
 * the current section's tab is scrolled into the row's view.
 */
export function SectionTabs({ label, tabs }: { label: string; tabs: SectionTab[] }) {
  const strip = useRef<HTMLElement>(null);
  const { pathname } = useLocation();
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs on navigation by design
  useEffect(() => {
    const nav = strip.current;
    const current = nav?.querySelector<HTMLElement>('[aria-current="page"]');
    if (!nav || !current) return;
    // Scrolls the strip alone (scrollIntoView could move the page too).
    const start = current.getBoundingClientRect().left - nav.getBoundingClientRect().left + nav.scrollLeft;
    const end = start + current.offsetWidth;
    if (start < nav.scrollLeft || end > nav.scrollLeft + nav.clientWidth) {
      nav.scrollLeft = start - (nav.clientWidth - current.offsetWidth) / 2;
    }
  }, [pathname]);
  return (
    <nav className="tabs" aria-label={label} ref={strip}>
      {tabs.map((tab) => (
        <NavLink key={tab.to} to={tab.to} end>
          {tab.label}
        </NavLink>
      ))}
    </nav>
  );
}
