import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { lowestFree, parsePool, poolContains } from "../../src/cloud/addresses.ts";
import { coerceObject, expandBrackets } from "../../src/cloud/coerce.ts";
import { DriverRejection } from "../../src/cloud/driver/types.ts";
import { retryOnConflict, unlessRejected } from "../../src/cloud/outcome.ts";
import { hashPassword, verifyPassword } from "../../src/cloud/secrets.ts";
import { loadSecretKey, SECRET_KEY_FILE, SecretBox } from "../../src/secret-box.ts";
import { isUniqueViolation } from "../../src/store/transactions.ts";
import { mountTmpfs, unmountTmpfs } from "../support/tmpfs.ts";

describe("address pools", () => {
  it("excludes the network and broadcast addresses and picks the lowest free one", () => {
    const pool = parsePool("203.0.113.0/24");
    expect(lowestFree(pool, [])).toBe("203.0.113.1");
    expect(lowestFree(pool, ["203.0.113.1", "203.0.113.3"])).toBe("203.0.113.2");
    expect(poolContains(pool, "203.0.113.255")).toBe(false);
    const tiny = parsePool("198.51.100.0/30");
    expect(lowestFree(tiny, ["198.51.100.1", "198.51.100.2"])).toBeUndefined();
    expect(() => parsePool("10.0.0.0/33")).toThrow();
    expect(() => parsePool("nonsense")).toThrow();
  });
});

describe("form coercion", () => {
  /** A form body read with the default depth limit. */
  const FORM = { maxDepth: 64 };
  const schema = {
    type: "object",
    properties: {
      count: { type: "integer" },
      flag: { type: "boolean" },
      tags: { type: "array", items: { type: "string" } },
      rules: {
        type: "array",
        items: { type: "object", properties: { port: { type: "integer" } } },
      },
      name: { type: "string" },
    },
  };

  it("converts unambiguous text and leaves the rest for validation to refuse", () => {
    expect(coerceObject(schema, { count: "12", flag: "1", tags: "a", name: "7" }, FORM)).toEqual({
      count: 12,
      flag: true,
      tags: ["a"],
      name: "7",
    });
    expect(coerceObject(schema, { count: "1.5", flag: "yes" }, FORM)).toEqual({ count: "1.5", flag: "yes" });
    expect(coerceObject(schema, { count: "12", flag: 0, rules: [{ port: "80" }] }, undefined)).toEqual({
      count: 12,
      flag: false,
      rules: [{ port: 80 }],
    });
    expect(coerceObject(schema, { flag: "True" }, FORM)).toEqual({ flag: true });
    expect(coerceObject(schema, { flag: "FALSE" }, undefined)).toEqual({ flag: false });
  });

  it("expands bracket notation without touching prototypes", () => {
    expect(expandBrackets({ "rules[1][port]": "2", "rules[0][port]": "1", plain: "x" }, FORM)).toEqual({
      rules: [{ port: "1" }, { port: "2" }],
      plain: "x",
    });
    expect(
      expandBrackets(
        {
          "public_keys[]": ["ssh-ed25519 A", "ssh-ed25519 B"],
          "rules[][port]": ["80", "443"],
          "rules[][protocol]": "TCP",
          "one[]": "x",
        },
        FORM,
      ),
    ).toEqual({
      public_keys: ["ssh-ed25519 A", "ssh-ed25519 B"],
      rules: [{ port: "80", protocol: "TCP" }, { port: "443" }],
      one: ["x"],
    });
    const hostile = expandBrackets({ "__proto__[polluted]": "1", "a[constructor][prototype]": "1" }, FORM);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(hostile).toEqual({});
    expect(coerceObject(schema, { "rules[0][port]": "80" }, FORM)).toEqual({ rules: [{ port: 80 }] });
  });
});

describe("secrets", () => {
  it("seals and opens with the bound context only", () => {
    const box = new SecretBox(() => loadSecretKey("a configured secret", "/nonexistent"));
    const sealed = box.seal("s3cr3t", "AKIA1");
    expect(sealed).not.toContain("s3cr3t");
    expect(box.open(sealed, "AKIA1")).toBe("s3cr3t");
    expect(() => box.open(sealed, "AKIA2")).toThrow();
    const other = new SecretBox(() => loadSecretKey("another secret", "/nonexistent"));
    expect(() => other.open(sealed, "AKIA1")).toThrow(/not the one it was stored with/);
  });

  it("generates a key file once, mode 0600, and reads the same key afterwards", () => {
    const dir = mkdtempSync(join(tmpdir(), "cumulo-secret-"));
    try {
      const first = loadSecretKey(undefined, dir);
      expect(first).toHaveLength(32);
      expect(statSync(join(dir, SECRET_KEY_FILE)).mode & 0o777).toBe(0o600);
      expect(loadSecretKey(undefined, dir).equals(first)).toBe(true);
      const sealed = new SecretBox(() => first).seal("kept", "ctx");
      expect(new SecretBox(() => loadSecretKey(undefined, dir)).open(sealed, "ctx")).toBe("kept");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // QA of 5 December (session 42): a full disk at the key's first write left an empty key file, and
  // every secret-using route answered 500 from then on, also after a restart, until it was deleted.
  it("never leaves a partial key file; an empty one left by an earlier version is made again", () => {
    const dir = mkdtempSync(join(tmpdir(), "cumulo-secret-"));
    const full = join(dir, "full");
    mkdirSync(full);
    const mounted = mountTmpfs(full, "4k");
    try {
      if (mounted) {
        writeFileSync(join(full, "filler"), Buffer.alloc(4096));
        expect(() => loadSecretKey(undefined, full)).toThrow(expect.objectContaining({ code: "ENOSPC" }));
        expect(readdirSync(full)).toEqual(["filler"]);
        rmSync(join(full, "filler"));
        expect(loadSecretKey(undefined, full)).toHaveLength(32);
      }
      writeFileSync(join(dir, SECRET_KEY_FILE), "");
      const made = loadSecretKey(undefined, dir);
      expect(made).toHaveLength(32);
      expect(loadSecretKey(undefined, dir).equals(made)).toBe(true);
      expect(readdirSync(dir).sort()).toEqual([SECRET_KEY_FILE, "full"]);
    } finally {
      if (mounted) unmountTmpfs(full);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("hashes passwords with a salt", async () => {
    const a = await hashPassword("hunter22");
    const b = await hashPassword("hunter22");
    expect(a).not.toBe(b);
    expect(await verifyPassword("hunter22", a)).toBe(true);
    expect(await verifyPassword("hunter23", a)).toBe(false);
  });
});

describe("outcomes", () => {
  it("turns driver refusals into a rejected outcome and lets real failures through", async () => {
    expect(await unlessRejected(async () => ({ outcome: "created" }))).toEqual({ outcome: "created" });
    expect(
      await unlessRejected(async () => Promise.reject(new DriverRejection("cannot resize now"))),
    ).toEqual({
      outcome: "rejected",
      message: "cannot resize now",
    });
    await expect(unlessRejected(async () => Promise.reject(new Error("disk on fire")))).rejects.toThrow(
      "disk on fire",
    );
  });

  it("retries only unique violations", async () => {
    let calls = 0;
    const value = await retryOnConflict(async () => {
      calls++;
      if (calls < 3) throw Object.assign(new Error("dup"), { code: "23505" });
      return "won";
    });
    expect(value).toBe("won");
    expect(calls).toBe(3);
    expect(isUniqueViolation({ code: "SQLITE_CONSTRAINT_UNIQUE" })).toBe(true);
    let other = 0;
    await expect(
      retryOnConflict(async () => {
        other++;
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    expect(other).toBe(1);
  });
});
