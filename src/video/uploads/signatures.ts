import { createHmac, timingSafeEqual } from "node:crypto";
import type { Clock } from "../../clock.ts";
import { type AuthContext, type Issuer, issuerOf } from "../../identity/service.ts";
import type { VideoRepository } from "../../media/video-repository.ts";

export const DEFAULT_UPLOAD_AUTH_TTL_S = 3600;
export const MAX_UPLOAD_AUTH_TTL_S = 7 * 86_400;

export type SignatureCheck = "valid" | "invalid" | "expired" | "revoked";

/** `AuthorizationSignature`: the issuer, a dot, then the HMAC in hex. */
const SIGNATURE = /^([ku][1-9]\d{0,15})\.([0-9a-f]{64})$/;

/**
 * Signed upload authorizations, so a browser can upload one video's source without the API key:
 * `signature` = `{issuer}.{hex HMAC-SHA256 over upload:v2:{issuer}:{library_id}:{video_id}:{expires}}`,
 * keyed by a key derived from Cumulo's secret key (the one that encrypts cloud secrets) with its own
 * label, so it can never be mistaken for a playback token. The issuer (`Issuer`) is checked at each
 * use: an authorization stops working when the key that made it is revoked or its person removed.
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

  sign(issuer: Issuer, libraryId: string, videoId: string, expires: number): string {
    const mac = createHmac("sha256", this.#signingKey)
      .update(`upload:v2:${issuer}:${libraryId}:${videoId}:${expires}`)
      .digest("hex");
    return `${issuer}.${mac}`;
  }

  issue(
    issuer: Issuer,
    libraryId: string,
    videoId: string,
    ttlS: number,
  ): { signature: string; expires: number } {
    const expires = this.#nowS() + ttlS;
    return { signature: this.sign(issuer, libraryId, videoId, expires), expires };
  }

  /** The signature's check, with its issuer when it is genuine (whose liveness the caller checks). */
  check(
    libraryId: string,
    videoId: string,
    signature: string,
    expires: string,
  ): { check: "invalid" } | { check: "valid" | "expired"; issuer: Issuer } {
    const parts = SIGNATURE.exec(signature.toLowerCase());
    if (!parts || !/^\d{1,12}$/.test(expires)) return { check: "invalid" };
    const issuer = parts[1] as Issuer;
    const given = Buffer.from(parts[0], "utf8");
    const expected = Buffer.from(this.sign(issuer, libraryId, videoId, Number(expires)), "utf8");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { check: "invalid" };
    return { check: Number(expires) <= this.#nowS() ? "expired" : "valid", issuer };
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
    private readonly issuerLive: (issuer: Issuer) => Promise<boolean>,
  ) {}

  async issue(auth: AuthContext, libraryId: string, videoId: string, ttlS: number): Promise<IssueOutcome> {
    const video = await this.videos.find(libraryId, videoId);
    if (!video || video.organization_id !== auth.organizationId) return { outcome: "not_found" };
    return { outcome: "issued", ...this.signer.issue(issuerOf(auth), libraryId, videoId, ttlS) };
  }

  async check(
    libraryId: string,
    videoId: string,
    signature: string,
    expires: string,
  ): Promise<SignatureCheck> {
    const checked = this.signer.check(libraryId, videoId, signature, expires);
    if (checked.check !== "valid") return checked.check;
    return (await this.issuerLive(checked.issuer)) ? "valid" : "revoked";
  }
}
