import type { RateLimitSetting } from "../../config.ts";
import type { ConsoleService } from "../console-service.ts";
import type { IdentityService } from "../service.ts";

export interface ConsoleRouteOptions {
  identity: IdentityService;
  console: ConsoleService;
  /**
   * Sign-in attempts allowed per (client address, email) pair in a window (ten times that per
   * address and per email); also invitation acceptances per address and password changes per user.
   */
  signInLimit: RateLimitSetting;
}

export const tags = ["console"];

/** The session cookie, as the OpenAPI document names it (components.securitySchemes). */
export const consoleSecurity: Record<string, string[]>[] = [{ consoleSession: [] }];
