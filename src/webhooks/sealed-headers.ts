import type { SecretBox } from "../secret-box.ts";
import { readJson, writeJson } from "../store/codec.ts";

export type EndpointHeaders = Record<string, string>;

/**
 * An endpoint's custom headers as the store keeps them: sealed by the secret box with the endpoint
 * id bound, as its signing secret is, since a receiver's credential belongs there (docs/webhooks.md)
 * and a copy of the store must not yield it (docs/security.md). The column holds JSON: the sealed
 * text as a JSON string. Headers stored by versions before sealing (a JSON object) are read as they
 * are; each node seals them when it starts (`WebhookService.sealPlainSecrets`).
 */
export class SealedHeaders {
  constructor(private readonly box: SecretBox) {}

  /** The stored form of `headers` for endpoint `endpointId` (null stays null). */
  seal(endpointId: string, headers: EndpointHeaders | null): string | null {
    return headers === null ? null : writeJson(this.box.seal(JSON.stringify(headers), context(endpointId)));
  }

  /**
   * The headers a stored value holds. Throws `SecretKeyMismatchError` when the value was sealed with
   * another secret key, as a signing secret does.
   */
  open(endpointId: string, stored: string | null): EndpointHeaders | null {
    const value = readJson<EndpointHeaders | string>(stored);
    if (typeof value !== "string") return value;
    return JSON.parse(this.box.open(value, context(endpointId))) as EndpointHeaders;
  }

  /** Whether a stored value is an earlier version's plain JSON object, still to be sealed. */
  isPlain(stored: string | null): stored is string {
    return stored !== null && typeof readJson<unknown>(stored) === "object" && readJson(stored) !== null;
  }
}

/** Bound to the endpoint, and named apart from its signing secret. */
const context = (endpointId: string) => `webhook-endpoint-headers:${endpointId}`;
