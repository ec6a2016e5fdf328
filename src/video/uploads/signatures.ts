import { createHmac, timingSafeEqual } from "node:crypto";
import type { Clock } from "../../clock.ts";
import type { VideoRepository } from "../../media/video-repository.ts";

export const DEFAULT_UPLOAD_AUTH_TTL_S = 3600;
export const MAX_UPLOAD_AUTH_TTL_S = 7 * 86_400;

export type SignatureCheck = "valid" | "invalid" | "expired";

/**
 * Signed upload authorizations, so a browser can upload one video's source without the API key:
 * `signature` = hex HMAC-SHA256 over `upload:v1:{library_id}:{video_id}:{expires}`, keyed by a key
 * derived from Cumulo's secret key (the one that encrypts cloud secrets) with its own label, so it
 * can never be mistaken for a playback token.
 */
export class UploadSigner {
  #key: Buffer | undefined;

  constructor(
    private readonly loadSecret: () => Buffer,
    private readonly clock: Clock,
  ) {}

  get #signingKey(): Buffer {
    this.#key ??= createHmac("sha256", this.loadSecret()).update("cumulo-upload-authorizations").digest();
    return this.#key;
  }

  sign(libraryId: string, videoId: string, expires: number): string {
    return createHmac("sha256", this.#signingKey)
      .update(`upload:v1:${libraryId}:${videoId}:${expires}`)
      .digest("hex");
  }

  issue(libraryId: string, videoId: string, ttlS: number): { signature: string; expires: number } {
    const expires = this.#nowS() + ttlS;
    return { signature: this.sign(libraryId, videoId, expires), expires };
  }

  check(libraryId: string, videoId: string, signature: string, expires: string): SignatureCheck {
    if (!/^\d{1,12}$/.test(expires)) return "invalid";
    const given = Buffer.from(signature.toLowerCase(), "utf8");
    const expected = Buffer.from(this.sign(libraryId, videoId, Number(expires)), "utf8");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return "invalid";
    return Number(expires) <= this.#nowS() ? "expired" : "valid";
  }

  #nowS(): number {
    return Math.floor(this.clock.now().getTime() / 1000);
  }
}

export type IssueOutcome =
  | { outcome: "issued"; signature: string; expires: number }
  | { outcome: "not_found" };

/** Issues and checks upload authorizations for the videos of the calling organization. */
export class UploadAuthorizations {
  constructor(
    readonly signer: UploadSigner,
    private readonly videos: VideoRepository,
  ) {}

  async issue(
    organizationId: string,
    libraryId: string,
    videoId: string,
    ttlS: number,
  ): Promise<IssueOutcome> {
    const video = await this.videos.find(libraryId, videoId);
    if (!video || video.organization_id !== organizationId) return { outcome: "not_found" };
    return { outcome: "issued", ...this.signer.issue(libraryId, videoId, ttlS) };
  }

  check(libraryId: string, videoId: string, signature: string, expires: string): SignatureCheck {
    return this.signer.check(libraryId, videoId, signature, expires);
  }
}
