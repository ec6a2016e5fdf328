import { hash, randomBytes } from "node:crypto";

/** What every generated key starts with. */
export const KEY_PREFIX = "cmk_";
const DISPLAY_PREFIX_LENGTH = 12;

/** Longest name of an API key (the API and the CLI alike) and of an organization. */
export const API_KEY_NAME_MAX = 100;
export const ORGANIZATION_NAME_MAX = 255;

/** A new API key secret: `cmk_` and 43 base64url characters (256 random bits). */
export const generateApiKey = (): string => KEY_PREFIX + randomBytes(32).toString("base64url");

/**
 * API keys, session cookies and invitation tokens are high-entropy secrets, so one SHA-256 is enough
 * to keep them unrecoverable at rest (passwords, chosen by people, are hashed with scrypt instead).
 * Run on every authenticated request: the one-shot `hash` takes a third of a Hash object's time.
 */
export const hashSecret = (secret: string): string => hash("sha256", secret, "hex");

/** What `generateApiKey` makes. */
const GENERATED_KEY = /^cmk_[\w-]{43}$/;

/**
 * The part of a key kept in clear, to recognise it in listings, which every key and console user of
 * the organization reads (read-only ones too). A generated key shows `cmk_` and 8 of its 43 random
 * characters. A key someone chose (`CUMULO_BOOTSTRAP_API_KEY`, a seed's `api_key`) may be as short
 * as 20 characters and guessable, so it shows at most a quarter of them: 12 of 20 shown left little
 * to guess of the organization's admin key (docs/security.md).
 */
export const displayPrefix = (secret: string): string =>
  secret.slice(
    0,
    GENERATED_KEY.test(secret)
      ? DISPLAY_PREFIX_LENGTH
      : Math.min(DISPLAY_PREFIX_LENGTH, Math.floor(secret.length / 4)),
  );

/** A session cookie value or an invitation token: 256 random bits, base64url. */
export const generateToken = (): string => randomBytes(32).toString("base64url");
