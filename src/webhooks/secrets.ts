import { randomBytes } from "node:crypto";
import { LRUCache } from "lru-cache";
import type { SecretBox } from "../secret-box.ts";

/** The form versions before sealing kept in the store, and the form every secret is answered in. */
export const PLAIN_PREFIX = "whsec_";

/** Endpoints whose opened secret is kept in memory; each entry is about 200 bytes. */
const OPENED_SECRETS_KEPT = 10_000;

/**
 * Webhook signing secrets as the store keeps them: sealed by the secret box (AES-256-GCM under
 * CUMULO_SECRET_KEY or the key file), with the endpoint id bound, so a sealed value copied onto
 * another endpoint's row does not open. Rows written in plain text (`whsec_...`) by versions before
 * sealing, or by an older node during a rolling upgrade, are read as they are; each node seals them
 * when it starts (`WebhookService.sealPlainSecrets`).
 */
export class SigningSecrets {
  /**
   * The opened secret per endpoint (and its previous one during a rotation's overlap, under its own
   * entry), with the sealed value it came from: every delivery signs with its endpoint's secret, and
   * opening costs a decryption that a lookup does not. A rotation writes a new sealed value, which
   * misses and replaces the entry.
   */
  readonly #opened = new LRUCache<string, { sealed: string; secret: string }>({ max: OPENED_SECRETS_KEPT });

  constructor(private readonly box: SecretBox) {}

  /** A new secret (`whsec_` + base64 of 32 random bytes) for endpoint `endpointId`, sealed. */
  generateSealed(endpointId: string): string {
    return this.seal(endpointId, `${PLAIN_PREFIX}${randomBytes(32).toString("base64")}`);
  }

  seal(endpointId: string, secret: string): string {
    return this.box.seal(secret, context(endpointId));
  }

  /** A stored value as sealed: as it is, or sealed now if an older version kept it in plain text. */
  sealedForm(endpointId: string, stored: string): string {
    return this.isPlain(stored) ? this.seal(endpointId, stored) : stored;
  }

  /** Whether a stored value is a plain-text secret of an older version, still to be sealed. */
  isPlain(stored: string): boolean {
    return stored.startsWith(PLAIN_PREFIX);
  }

  /**
   * The secret a stored value holds. Throws when it cannot be opened (a secret key other than the one
   * it was sealed with): the message says so, in words an operator can act on.
   */
  open(endpointId: string, stored: string): string {
    return this.#open(endpointId, endpointId, stored);
  }

  /** `open` for the endpoint's previous secret (`previous_secret`), kept in memory apart from its current one. */
  openPrevious(endpointId: string, stored: string): string {
    return this.#open(`${endpointId}/previous`, endpointId, stored);
  }

  #open(cacheKey: string, endpointId: string, stored: string): string {
    if (this.isPlain(stored)) return stored;
    const kept = this.#opened.get(cacheKey);
    if (kept?.sealed === stored) return kept.secret;
    const secret = this.box.open(stored, context(endpointId));
    this.#opened.set(cacheKey, { sealed: stored, secret });
    return secret;
  }
}

/** What a webhook secret is sealed with besides the key: its endpoint, named apart from other kinds of secret. */
const context = (endpointId: string) => `webhook-endpoint:${endpointId}`;
