import type { PageMeta } from "./schemas.ts";

export const ok = <T>(message: string, data: T) => ({ success: true as const, message, data });

export const okList = <T>(message: string, data: T[], meta: PageMeta) => ({
  success: true as const,
  message,
  data,
  meta,
});

export const okMessage = (message: string) => ({ success: true as const, message });
