import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { linkSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeDirectories } from "./directories.ts";

/**
 * The key file's name, and the label its configured form is hashed with, keep the names of the
 * object-storage secrets they were made for: changing either would change every installation's key.
 */
export const SECRET_KEY_FILE = "cloud-secret.key";

/**
 * The 256-bit key that encrypts stored secrets. From CUMULO_SECRET_KEY when set (hashed to 32
 * bytes); else a random key generated once and kept in `<dataDir>/cloud-secret.key` (mode 0600).
 */
export function loadSecretKey(secretKey: string | undefined, dataDir: string): Buffer {
  if (secretKey) return createHash("sha256").update(`cumulo-cloud-secrets:${secretKey}`).digest();
  const path = join(dataDir, SECRET_KEY_FILE);
  try {
    const text = readFileSync(path, "utf8");
    // Empty, it is what a full disk left of a first write before 5 December: no secret was ever
    // sealed with it, and it is made again.
    if (text !== "") return decodeKeyFile(text, path);
    rmSync(path, { force: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  makeDirectories(dataDir);
  const key = randomBytes(32);
  try {
    createKeyFile(path, `${key.toString("base64")}\n`);
    return key;
  } catch (error) {
    // Two processes started at once: the second one reads the first one's key.
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    return decodeKeyFile(readFileSync(path, "utf8"), path);
  }
}

/** Why a file system refuses a hard link (vfat, some network and FUSE mounts). */
const NO_LINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS"]);

/**
 * Creates the key file, or fails with EEXIST when it exists. Written whole under another name, then
 * linked into place, so it is never seen half written (a full disk). Where the file system has no
 * hard links it is written in place, and removed if the write fails after creating it.
 */
function createKeyFile(path: string, text: string): void {
  const written = `${path}.${randomBytes(6).toString("hex")}.tmp`;
  try {
    writeFileSync(written, text, { mode: 0o600, flag: "wx" });
    try {
      linkSync(written, path);
      return;
    } catch (error) {
      if (!NO_LINKS.has((error as NodeJS.ErrnoException).code ?? "")) throw error;
    }
    try {
      writeFileSync(path, text, { mode: 0o600, flag: "wx" });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") rmSync(path, { force: true });
      throw error;
    }
  } finally {
    rmSync(written, { force: true });
  }
}

function decodeKeyFile(text: string, path: string): Buffer {
  const key = Buffer.from(text.trim(), "base64");
  if (key.length !== 32) throw new Error(`${path} does not hold a 32-byte base64 key`);
  return key;
}

/**
 * A stored secret that does not open under this node's secret key (another key than the one it was
 * sealed with): the operator's to put right, so the API answers 503 rather than 500.
 */
export class SecretKeyMismatchError extends Error {
  constructor() {
    // Node's own words ("unable to authenticate data") say nothing an operator can act on.
    super(
      "a stored secret could not be decrypted: the secret key (CUMULO_SECRET_KEY, else <data dir>/cloud-secret.key) is not the one it was stored with (docs/operations.md, Backups)",
    );
    this.name = "SecretKeyMismatchError";
  }
}

/** Whether `open` opens its secret, or throws (a secret key other than the one it was sealed with). */
export function opens(open: () => unknown): boolean {
  try {
    open();
    return true;
  } catch {
    return false;
  }
}

/** AES-256-GCM with a random 96-bit IV; `context` is bound as associated data. */
export class SecretBox {
  #key: Buffer | undefined;

  /** `key` is read on first use, so commands that never touch a secret create no key file. */
  constructor(private readonly loadKey: () => Buffer) {}

  private get key(): Buffer {
    this.#key ??= this.loadKey();
    return this.#key;
  }

  seal(plaintext: string, context: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.key, iv);
    cipher.setAAD(Buffer.from(context));
    const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return `v1.${Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString("base64")}`;
  }

  open(sealed: string, context: string): string {
    if (!sealed.startsWith("v1.")) throw new Error("unknown secret format");
    const raw = Buffer.from(sealed.slice(3), "base64");
    const decipher = createDecipheriv("aes-256-gcm", this.key, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(raw.subarray(12, 28));
    try {
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8");
    } catch {
      throw new SecretKeyMismatchError();
    }
  }
}
