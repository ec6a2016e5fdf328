// The console's theme, set on <html> before the page is drawn: a classic script in <head> (the
// Content-Security-Policy allows no inline script), so no page shows in the wrong theme first. The
// choice ("light" or "dark"; none: follow the system) is kept by web/src/theme.ts, which also follows
// the system's changes while the console is open.
{
  let choice = null;
  try {
    choice = localStorage.getItem("cumulo-console-theme");
  } catch {
    // Storage refused (a locked-down browser): the system's theme.
  }
  const dark =
    choice === "dark" || (choice !== "light" && matchMedia("(prefers-color-scheme: dark)").matches);
  document.documentElement.dataset.theme = dark ? "dark" : "light";
}
