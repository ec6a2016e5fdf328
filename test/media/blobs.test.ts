import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { LocalBlobStore } from "../../src/blobs/local.ts";
import { BlobTooLargeError } from "../../src/blobs/store.ts";

describe("local blob store", () => {
  const dir = mkdtempSync(join(tmpdir(), "cumulo-blobs-"));
  const blobs = new LocalBlobStore(dir);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const read = async (key: string) => {
    const chunks: Buffer[] = [];
    for await (const chunk of blobs.open(key)) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString();
  };

  it("stores, reads, checks and deletes blobs", async () => {
    const stored = await blobs.put(
      "media/a/b/file",
      Readable.from([Buffer.from("hello "), Buffer.from("world")]),
      {
        maxBytes: 11,
      },
    );
    expect(stored).toEqual({ key: "media/a/b/file", sizeBytes: 11 });
    expect(await read("media/a/b/file")).toBe("hello world");
    expect(await blobs.exists("media/a/b/file")).toBe(true);
    await blobs.deletePrefix("media/a");
    expect(await blobs.exists("media/a/b/file")).toBe(false);
    await blobs.delete("media/a/b/file");
  });

  it("stops a stream past its limit and leaves nothing behind", async () => {
    const body = Readable.from([Buffer.alloc(600), Buffer.alloc(600)]);
    await expect(blobs.put("media/big", body, { maxBytes: 1000 })).rejects.toBeInstanceOf(BlobTooLargeError);
    expect(await blobs.exists("media/big")).toBe(false);
    expect(readdirSync(join(dir, "blobs", ".tmp"))).toEqual([]);
  });

  it("refuses keys that could leave its root", async () => {
    for (const key of ["../escape", "media/../../x", "/abs", "Media/Upper", "a//b"]) {
      await expect(blobs.put(key, Readable.from(["x"]), { maxBytes: 10 })).rejects.toThrow(
        /Invalid blob key/,
      );
    }
  });
});
