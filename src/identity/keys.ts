import { hash, randomBytes } from "node:crypto";

const KEY_PREFIX = "cmk_";
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

/** The part of a key kept in clear, to recognise it in listings. */
export const displayPrefix = (secret: string): string => secret.slice(0, DISPLAY_PREFIX_LENGTH);

/** A session cookie value or an invitation token: 256 random bits, base64url. */
export const generateToken = (): string => randomBytes(32).toString("base64url");
