import type { Readable } from "node:stream";
import { request } from "undici";
import type { MigrationProvider } from "../config.ts";

/** `malformed`: no provider issues such a token (it cannot travel in a header); the provider is not asked. */
export type CredentialCheck =
  | { outcome: "valid" }
  | { outcome: "rejected" }
  | { outcome: "malformed" }
  | { outcome: "unavailable" };

interface ProviderCall {
  path: (token: string) => string;
  /** Bearer token in `Authorization`, unless the provider takes it in the query. */
  bearer: boolean;
  /** A 2xx answer may still say the token is unusable. */
  accepts?: (body: unknown) => boolean;
}

const CALLS: Record<MigrationProvider, ProviderCall> = {
  vimeo: { path: () => "/oauth/verify", bearer: true },
  wistia: { path: () => "/v1/account.json", bearer: true },
  youtube: { path: (token) => `/tokeninfo?access_token=${encodeURIComponent(token)}`, bearer: false },
  dailymotion: { path: () => "/auth", bearer: true },
  cloudflare: {
    path: () => "/client/v4/user/tokens/verify",
    bearer: true,
    accepts: (body) =>
      typeof body === "object" &&
      body !== null &&
      (body as { result?: { status?: unknown } }).result?.status === "active",
  },
};

export const PROVIDER_TIMEOUT_MS = 10_000;
const MAX_BODY_BYTES = 256 * 1024;
/** Characters a header value cannot carry: controls (tab aside) and anything beyond Latin-1. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const UNSENDABLE_IN_HEADER = /[\u0000-\u0008\u000a-\u001f\u007f\u0100-\uffff]/;

/**
 * Asks an external video platform whether an access token works (before a migration from it).
 * Redirects are not followed; 401/403/other 4xx means rejected; a timeout, network error, 429, 5xx
 * or an unreadable body where the answer is in the body means the provider could not answer.
 */
export class MigrationCredentialValidator {
  constructor(
    private readonly baseUrls: Record<MigrationProvider, string>,
    private readonly timeoutMs: number = PROVIDER_TIMEOUT_MS,
  ) {}

  async validate(provider: MigrationProvider, token: string): Promise<CredentialCheck> {
    const call = CALLS[provider];
    // No provider issues a token that cannot travel in a header (a line break, say): refused here,
    // rather than read as a provider that could not be reached when the request cannot be made.
    if (UNSENDABLE_IN_HEADER.test(token)) return { outcome: "malformed" };
    const signal = AbortSignal.timeout(this.timeoutMs);
    try {
      const response = await request(`${this.baseUrls[provider]}${call.path(token)}`, {
        method: "GET",
        headers: {
          accept: "application/json",
          "user-agent": "Cumulo-Migrations",
          ...(call.bearer ? { authorization: `Bearer ${token}` } : {}),
        },
        signal,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      const status = response.statusCode;
      if (status >= 200 && status < 300 && call.accepts) {
        const body = await readJsonBody(response.body);
        // A 2xx that is not JSON (or is too large) is a provider that did not answer, not a rejection.
        if (body === undefined) return { outcome: "unavailable" };
        return call.accepts(body) ? { outcome: "valid" } : { outcome: "rejected" };
      }
      // The status is the whole answer: the body is dropped unread, so a provider dripping it cannot
      // hold the check until the timeout.
      discard(response.body);
      if (status === 429 || status >= 500 || (status >= 300 && status < 400)) {
        return { outcome: "unavailable" };
      }
      if (status >= 400) return { outcome: "rejected" };
      return { outcome: "valid" };
    } catch {
      return { outcome: "unavailable" };
    }
  }
}

/** Drops a body unread. Destroying it reports an abort error, which nothing needs to hear. */
function discard(body: Readable): void {
  body.on("error", () => {});
  body.destroy();
}

/** The parsed body, or undefined when it is not JSON or is larger than MAX_BODY_BYTES. */
async function readJsonBody(body: AsyncIterable<Buffer>): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    return undefined;
  }
}
