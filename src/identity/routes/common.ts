import type { RateLimitSetting } from "../../config.ts";
import type { ConsoleService } from "../console-service.ts";
import type { IdentityService } from "../service.ts";

export interface ConsoleRouteOptions {
  identity: IdentityService;
  console: ConsoleService;
  /** Sign-in attempts allowed per client address and per email in a window. */
  signInLimit: RateLimitSetting;
  /** CUMULO_PUBLIC_URL: an https one makes the session cookie `Secure`. */
  publicUrl: string | undefined;
}

export const tags = ["console"];

/** The session cookie, as the OpenAPI document names it (components.securitySchemes). */
export const consoleSecurity: Record<string, string[]>[] = [{ consoleSession: [] }];
