import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from "node:crypto";

/**
 * scrypt parameters (docs/console.md): N = 2^15, r = 8, p = 1 uses 32 MiB and about 0.1 s of one
 * core per hash, OWASP's recommended minimum for scrypt. They are stored with each hash, so raising
 * them later leaves existing hashes verifiable.
 */
const PARAMETERS = { N: 2 ** 15, r: 8, p: 1 } as const;
const KEY_BYTES = 32;
const SALT_BYTES = 16;
const ALGORITHM = "scrypt";

export const PASSWORD_MIN_LENGTH = 10;
export const PASSWORD_MAX_LENGTH = 200;

function derive(password: string, salt: Buffer, options: { N: number; r: number; p: number }) {
  const scryptOptions: ScryptOptions = { ...options, maxmem: 256 * options.N * options.r };
  return new Promise<Buffer>((resolve, reject) =>
    scrypt(password.normalize("NFC"), salt, KEY_BYTES, scryptOptions, (error, key) =>
      error ? reject(error) : resolve(key),
    ),
  );
}

/** `scrypt$N$r$p$salt$key`, salt and key in base64url. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, PARAMETERS);
  const { N, r, p } = PARAMETERS;
  return [ALGORITHM, N, r, p, salt.toString("base64url"), key.toString("base64url")].join("$");
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [algorithm, N, r, p, salt, key] = stored.split("$");
  if (algorithm !== ALGORITHM || !salt || !key) return false;
  const expected = Buffer.from(key, "base64url");
  const actual = await derive(password, Buffer.from(salt, "base64url"), {
    N: Number(N),
    r: Number(r),
    p: Number(p),
  });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/**
 * A hash no password matches, checked when the email is unknown so that a wrong email costs the
 * same time as a wrong password and sign-in does not tell which emails exist.
 */
export const UNKNOWN_USER_HASH = `${ALGORITHM}$${PARAMETERS.N}$${PARAMETERS.r}$${PARAMETERS.p}$${randomBytes(SALT_BYTES).toString("base64url")}$${randomBytes(KEY_BYTES).toString("base64url")}`;
