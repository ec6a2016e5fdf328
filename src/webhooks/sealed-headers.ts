import type { SecretBox } from "../secret-box.ts";
import { readJson, writeJson } from "../store/codec.ts";

export type EndpointHeaders = Record<string, string>;

/**
 * The one name the stored form of sealed headers has: `{"WEBHOOK_ID": "<sealed>"}`. The sender of
 * every version skips it (it reads as `webhook-id`, a header the signature owns), so a node of an
 * earlier version, during a rolling upgrade, sends no custom headers rather than pieces of the
 * sealed text as headers, and answers the endpoint rather than failing (QA of session 47).
 */
const SEALED_NAME = "WEBHOOK_ID";
/** How the stored text of sealed headers starts, for the store's queries. */
export const SEALED_TEXT_START = `{"${SEALED_NAME}":`;

/**
 * An endpoint's custom headers as the store keeps them: sealed by the secret box with the endpoint
 * id bound, as its signing secret is, since a receiver's credential belongs there (docs/webhooks.md)
 * and a copy of the store must not yield it (docs/security.md). Headers stored by versions before
 * sealing (any other JSON object) are read as they are; each node seals them when it starts
 * (`WebhookService.sealPlainSecrets`).
 */
export class SealedHeaders {
  constructor(private readonly box: SecretBox) {}

  /** The stored form of `headers` for endpoint `endpointId` (null stays null). */
  seal(endpointId: string, headers: EndpointHeaders | null): string | null {
    if (headers === null) return null;
    return writeJson({ [SEALED_NAME]: this.box.seal(JSON.stringify(headers), context(endpointId)) });
  }

  /**
   * The headers a stored value holds. Throws `SecretKeyMismatchError` when the value was sealed with
   * another secret key, as a signing secret does.
   */
  open(endpointId: string, stored: string | null): EndpointHeaders | null {
    const value = readJson<EndpointHeaders>(stored);
    const sealed = value === null ? undefined : sealedTextOf(value);
    if (sealed === undefined) return value;
    return JSON.parse(this.box.open(sealed, context(endpointId))) as EndpointHeaders;
  }

  /** Whether a stored value is an earlier version's plain headers, still to be sealed. */
  isPlain(stored: string | null): stored is string {
    const value = readJson<EndpointHeaders>(stored);
    return value !== null && sealedTextOf(value) === undefined;
  }
}

/** The sealed text a stored object holds, if it is the sealed form. */
function sealedTextOf(value: EndpointHeaders): string | undefined {
  const names = Object.keys(value);
  const text = value[SEALED_NAME];
  return names.length === 1 && text?.startsWith("v1.") ? text : undefined;
}

/** Bound to the endpoint, and named apart from its signing secret. */
const context = (endpointId: string) => `webhook-endpoint-headers:${endpointId}`;
