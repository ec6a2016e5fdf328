import { createHmac, timingSafeEqual } from "node:crypto";
import type { Clock } from "../clock.ts";

export const DEFAULT_TOKEN_TTL_S = 3600;
export const MAX_TOKEN_TTL_S = 86_400;

export type TokenCheck = "valid" | "missing" | "invalid" | "expired";

/**
 * Signed, expiring playback tokens: `token` = base64url HMAC-SHA256 over `v1:{video_id}:{expires}`,
 * keyed by a key derived from Cumulo's secret key (CUMULO_SECRET_KEY, else the key file in the data
 * dir, as for cloud secrets). A token is valid for every path under `/{video_id}/` until `expires`.
 */
export class PlaybackTokens {
  #key: Buffer | undefined;

  constructor(
    private readonly loadSecret: () => Buffer,
    private readonly clock: Clock,
  ) {}

  get #signingKey(): Buffer {
    this.#key ??= createHmac("sha256", this.loadSecret()).update("cumulo-playback-tokens").digest();
    return this.#key;
  }

  sign(videoId: string, expires: number): string {
    return createHmac("sha256", this.#signingKey).update(`v1:${videoId}:${expires}`).digest("base64url");
  }

  issue(videoId: string, ttlS: number): { token: string; expires: number } {
    // Rounded up to the next whole second, so a token lives at least the `ttlS` asked for.
    const expires = Math.ceil(this.clock.now().getTime() / 1000) + ttlS;
    return { token: this.sign(videoId, expires), expires };
  }

  check(videoId: string, token: string | undefined, expires: string | undefined): TokenCheck {
    if (!token || !expires) return "missing";
    if (!/^\d{1,12}$/.test(expires)) return "invalid";
    const given = Buffer.from(token, "utf8");
    const expected = Buffer.from(this.sign(videoId, Number(expires)), "utf8");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return "invalid";
    if (Number(expires) <= Math.floor(this.clock.now().getTime() / 1000)) return "expired";
    return "valid";
  }
}
