import { readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary, createVideo } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAAABJRU5ErkJggg==",
  "base64",
);

/**
 * Files removed after a commit (the replaced source, thumbnail or subtitle; a deleted video's or
 * library's files) while the blob store fails, as a bucket does in an outage: the committed change
 * is answered as done, and the new file is kept. A failed removal of the old source removed the new
 * one, and a delete answered 500 with its rows already gone.
 */
describe("removals after commit while the blob store fails", () => {
  let t: TestApp;
  let failing = false;
  beforeAll(async () => {
    // API only: no worker reads the sources.
    t = await startTestApp({ CUMULO_ROLES: "api", CUMULO_RATE_LIMIT: "100000/1m" });
    const { blobs } = t.cumulo.services;
    const outage = () => Promise.reject(new Error("bucket unreachable"));
    const [remove, removePrefix] = [blobs.delete.bind(blobs), blobs.deletePrefix.bind(blobs)];
    blobs.delete = (key) => (failing ? outage() : remove(key));
    blobs.deletePrefix = (prefix) => (failing ? outage() : removePrefix(prefix));
  });
  afterAll(() => t.close());

  it("keeps a new source, thumbnail and subtitle whose predecessors' removal fails", async () => {
    const library = (await createLibrary(t)).id;
    const video = (await createVideo(t, library)).id;
    const base = `/v1/media/libraries/${library}/videos/${video}`;
    const source = (text: string) =>
      t.request("PUT", `${base}/source`, {
        body: Buffer.from(text),
        headers: { "content-type": "video/mp4" },
      });
    const files = (folder: string) =>
      readdirSync(join(t.store.dataDir, "blobs", "media", library, video, folder));
    const thumbnail = () => {
      const data = new FormData();
      data.set("file", new Blob([PNG]), "t.png");
      return t.request("POST", `${base}/thumbnails`, { body: data });
    };
    const subtitleFile = (text: string) => {
      const data = new FormData();
      data.set("file", new Blob([`WEBVTT\n\n00:00:00.000 --> 00:00:01.000\n${text}\n`]), "s.vtt");
      return data;
    };

    expect((await source("first")).status).toBe(202);
    expect((await thumbnail()).status).toBe(200);
    const first = subtitleFile("first");
    first.set("title", "English");
    first.set("language", "en");
    const subtitle = await t.request("POST", `${base}/subtitles`, { body: first });
    expect(subtitle.status).toBe(201);

    failing = true;
    try {
      expect((await source("second")).status).toBe(202);
      expect((await thumbnail()).status).toBe(200);
      const replaced = await t.request("PUT", `${base}/subtitles/${subtitle.body.data.id}`, {
        body: subtitleFile("second"),
      });
      expect(replaced.status).toBe(200);
    } finally {
      failing = false;
    }
    // The new files are there (the old ones beside them, until a worker removes them).
    const processing = await t.request("GET", `${base}/processing`);
    expect(processing.body.data.source_bytes).toBe("second".length);
    expect(files("source")).toHaveLength(2);
    expect(files("thumbnails")).toHaveLength(2);
    expect(files("subtitles")).toHaveLength(2);
    const vtt = await t.request("GET", `${base}/subtitles/${subtitle.body.data.id}`);
    expect(files("subtitles")).toContain(vtt.body.data.path.split("/").pop());
  });

  it("answers a committed delete of a video or library as done", async () => {
    const library = (await createLibrary(t)).id;
    const video = (await createVideo(t, library)).id;
    const base = `/v1/media/libraries/${library}/videos/${video}`;
    await t.request("PUT", `${base}/source`, {
      body: Buffer.from("bytes"),
      headers: { "content-type": "video/mp4" },
    });
    failing = true;
    try {
      expect((await t.request("DELETE", base)).status).toBe(200);
      expect((await t.request("DELETE", `/v1/media/libraries/${library}`)).status).toBe(200);
    } finally {
      failing = false;
    }
    expect((await t.request("GET", `/v1/media/libraries/${library}`)).status).toBe(404);
  });
});
