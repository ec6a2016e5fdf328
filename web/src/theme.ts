import { useSyncExternalStore } from "react";

/** What a person chose in the theme picker; "system" follows the operating system's setting. */
export type ThemeChoice = "system" | "light" | "dark";
export type Theme = "light" | "dark";

// The same key and rule as web/public/theme.js, which sets the theme before the page is first drawn.
const STORAGE_KEY = "cumulo-console-theme";
const systemDark = window.matchMedia("(prefers-color-scheme: dark)");
const listeners = new Set<() => void>();

function storedChoice(): ThemeChoice {
  try {
    const stored = window.localStorage.getItem(STORAGE_KEY);
    return stored === "light" || stored === "dark" ? stored : "system";
  } catch {
    return "system";
  }
}

let choice = storedChoice();

function resolved(): Theme {
  if (choice !== "system") return choice;
  return systemDark.matches ? "dark" : "light";
}

/** `data-theme` on <html> is what the stylesheet's colours follow (styles.css). */
function apply() {
  document.documentElement.dataset.theme = resolved();
  for (const listener of listeners) listener();
}

systemDark.addEventListener("change", () => {
  if (choice === "system") apply();
});
// Another tab of the console changed the choice: this one follows.
window.addEventListener("storage", (event) => {
  if (event.key !== STORAGE_KEY) return;
  choice = storedChoice();
  apply();
});

export function chooseTheme(next: ThemeChoice) {
  choice = next;
  try {
    if (next === "system") window.localStorage.removeItem(STORAGE_KEY);
    else window.localStorage.setItem(STORAGE_KEY, next);
  } catch {
    // Not kept (storage refused), but applied to this page.
  }
  apply();
}

const subscribe = (listener: () => void) => {
  listeners.add(listener);
  return () => listeners.delete(listener);
};

/** The choice of the theme picker. */
export const useThemeChoice = (): ThemeChoice => useSyncExternalStore(subscribe, () => choice);

/** The theme shown now (a canvas drawn in its colours draws again when it changes). */
export const useTheme = (): Theme => useSyncExternalStore(subscribe, resolved);
