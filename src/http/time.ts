/** `2026-11-21T08:30:00.123+00:00`: webhook endpoint and delivery times carry an explicit offset. */
export const withOffset = (iso: string): string => iso.replace(/Z$/, "+00:00");

/** `2026-11-21 08:30:00`: cloud token times. */
export const cloudDateTime = (iso: string): string => iso.slice(0, 19).replace("T", " ");

export const unixSeconds = (iso: string): number => Math.floor(Date.parse(iso) / 1000);

/** `HH:MM:SS` of whole seconds. */
export function formatDuration(totalSeconds: number): string {
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds % 3600) / 60);
  const seconds = totalSeconds % 60;
  return [hours, minutes, seconds].map((part) => String(part).padStart(2, "0")).join(":");
}
