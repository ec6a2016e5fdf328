import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { createMigratedTestStore } from "../support/store.ts";
import { waitUntil } from "../support/wait.ts";
import { createLibrary, createVideo, fieldErrors, MISSING_ID } from "./helpers.ts";

const VTT = "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nHello\n\n00:00:02.000 --> 00:00:03.000\nWorld\n";
const SRT = "1\r\n00:00:01,000 --> 00:00:02,000\r\nHi\r\n";
// 1x1 PNG
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64",
);
const GIF = Buffer.from("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7", "base64");

function form(
  fields: Record<string, string>,
  file?: { name: string; content: string | Buffer; field?: string },
) {
  const data = new FormData();
  for (const [name, value] of Object.entries(fields)) data.set(name, value);
  if (file) data.set(file.field ?? "file", new Blob([file.content]), file.name);
  return data;
}

describe("subtitles and thumbnails", () => {
  let t: TestApp;
  let base: string;
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_MAX_SUBTITLE_BYTES: "2048", CUMULO_MAX_THUMBNAIL_BYTES: "4096" });
    const lib = await createLibrary(t);
    const video = await createVideo(t, lib.id);
    base = `/v1/media/libraries/${lib.id}/videos/${video.id}`;
  });
  afterAll(() => t.close());

  it("adds, lists, updates and deletes a subtitle", async () => {
    const created = await t.request("POST", `${base}/subtitles`, {
      body: form({ title: "English", language: "en-us" }, { name: "en.vtt", content: VTT }),
    });
    expect(created.status, created.text).toBe(201);
    const subtitle = created.body.data;
    expect(subtitle).toEqual({
      id: expect.any(String),
      video_id: base.split("/").pop(),
      title: "English",
      language: "en-US",
      path: expect.stringMatching(/^media\/[0-9a-f-]+\/[0-9a-f-]+\/subtitles\/[0-9a-f-]+$/),
      created_at: expect.any(String),
      updated_at: expect.any(String),
      deleted_at: null,
    });
    expect(subtitle.path).not.toContain("en.vtt");
    const stored = await readFile(join(t.config.dataDir, "blobs", ...subtitle.path.split("/")), "utf8");
    expect(stored).toBe(VTT);

    const list = await t.request("GET", `${base}/subtitles`);
    expect(list.body.data.map((s: { id: string }) => s.id)).toEqual([subtitle.id]);
    expect(list.body.meta.pagination.total).toBe(1);

    const renamed = await t.request("PUT", `${base}/subtitles/${subtitle.id}`, {
      body: form({ title: "EN" }),
    });
    expect(renamed.status).toBe(200);
    expect(renamed.body.data).toMatchObject({ title: "EN", language: "en-US", path: subtitle.path });
    // At most 255 characters, counted as a JSON field's are: an emoji is one, not two UTF-16 units.
    for (const [title, status] of [
      ["🎬".repeat(255), 200],
      ["🎬".repeat(256), 400],
    ] as const) {
      const titled = await t.request("PUT", `${base}/subtitles/${subtitle.id}`, { body: form({ title }) });
      expect(titled.status, `${[...title].length} characters`).toBe(status);
    }
    await t.request("PUT", `${base}/subtitles/${subtitle.id}`, { body: form({ title: "EN" }) });
    const refiled = await t.request("PUT", `${base}/subtitles/${subtitle.id}`, {
      body: form({ language: "pt-BR" }, { name: "x.srt", content: SRT }),
    });
    expect(refiled.body.data).toMatchObject({ title: "EN", language: "pt-BR" });
    expect(refiled.body.data.path).not.toBe(subtitle.path);
    // Well-formed BCP 47 beyond Unicode locale ids: grandfathered (as its preferred tag) and private use.
    for (const [sent, kept] of [
      ["i-klingon", "tlh"],
      ["x-whatever", "x-whatever"],
    ]) {
      const tagged = await t.request("PUT", `${base}/subtitles/${subtitle.id}`, {
        body: form({ language: sent as string }),
      });
      expect(tagged.status, tagged.text).toBe(200);
      expect(tagged.body.data.language).toBe(kept);
    }

    const none = await t.request("PUT", `${base}/subtitles/${subtitle.id}`, { body: form({ other: "x" }) });
    expect(fieldErrors(none.body)).toEqual({
      title: "validation_required",
      language: "validation_required",
      file: "validation_required",
    });

    const deleted = await t.request("DELETE", `${base}/subtitles/${subtitle.id}`);
    expect(deleted.body).toEqual({ success: true, message: "Subtitle deleted successfully" });
    expect((await t.request("GET", `${base}/subtitles/${subtitle.id}`)).status).toBe(404);
    expect((await t.request("DELETE", `${base}/subtitles/${subtitle.id}`)).status).toBe(404);
    expect(
      (await t.request("PUT", `${base}/subtitles/${subtitle.id}`, { body: form({ title: "x" }) })).status,
    ).toBe(404);
    expect((await t.request("GET", `${base}/subtitles`)).body.data).toEqual([]);
  });

  it("validates subtitle fields and content, all at once", async () => {
    const bad = await t.request("POST", `${base}/subtitles`, {
      body: form({ language: "not a tag" }, { name: "evil.vtt", content: "just some text" }),
    });
    expect(bad.status).toBe(400);
    expect(fieldErrors(bad.body)).toEqual({
      title: "validation_required",
      language: "validation_format",
      file: "validation_mimes",
    });
    // Sent empty is not missing: as a JSON field's minimum length says it.
    const empty = await t.request("POST", `${base}/subtitles`, {
      body: form({ title: "", language: " " }, { name: "ok.vtt", content: "WEBVTT\n" }),
    });
    expect(fieldErrors(empty.body)).toEqual({ title: "validation_min", language: "validation_min" });
    // In the same words as a JSON field's.
    expect(empty.body.errors.map((error: { message: string }) => error.message)).toEqual([
      "The title field must not be empty.",
      "The language field must not be empty.",
    ]);
    // A title too long, in the words of a video's or a library's too-long JSON title.
    const long = await t.request("POST", `${base}/subtitles`, {
      body: form({ title: "x".repeat(256), language: "en" }, { name: "ok.vtt", content: VTT }),
    });
    const longJson = await t.request("PATCH", base, { json: { title: "x".repeat(256) } });
    expect(long.body.errors).toEqual(longJson.body.errors);
    expect(long.body.errors).toEqual([
      {
        field: "title",
        code: "validation_max",
        message: "The title field must be at most 255 characters long.",
      },
    ]);
    const missing = await t.request("POST", `${base}/subtitles`, {
      body: form({ title: "x", language: "en" }),
    });
    expect(fieldErrors(missing.body)).toEqual({ file: "validation_required" });
    const wrongField = await t.request("POST", `${base}/subtitles`, {
      body: form({ title: "x", language: "en" }, { name: "a.vtt", content: VTT, field: "upload" }),
    });
    expect(fieldErrors(wrongField.body)).toEqual({ file: "validation_required" });
    const binary = await t.request("POST", `${base}/subtitles`, {
      body: form({ title: "x", language: "en" }, { name: "a.vtt", content: PNG }),
    });
    expect(fieldErrors(binary.body)).toEqual({ file: "validation_mimes" });
  });

  it("answers 413 for an oversized file, 415 for a non-multipart body and names the fields of none", async () => {
    const big = await t.request("POST", `${base}/subtitles`, {
      body: form(
        { title: "x", language: "en" },
        { name: "a.vtt", content: `WEBVTT\n\nNOTE ${"x".repeat(5000)}\n` },
      ),
    });
    expect(big.status).toBe(413);
    expect(big.body).toEqual({ success: false, message: "Payload Too Large" });
    const badId = await t.request("POST", `${base.replace(/videos\/.*/, "videos/nope")}/subtitles`, {
      body: form({ title: "x", language: "en" }, { name: "a.vtt", content: VTT }),
    });
    expect(badId.status).toBe(404);
    const json = await t.request("POST", `${base}/subtitles`, { json: { title: "x", language: "en" } });
    expect(json.status).toBe(415);
    expect(json.body).toEqual({ success: false, message: "Unsupported Media Type" });
    // Whatever the JSON parser would have made of it: unparsable, or over the JSON body limit.
    for (const [path, body] of [
      [`${base}/subtitles`, "{"],
      [`${base}/thumbnails`, "not json"],
      [`${base}/source`, "x".repeat(2 * 1024 * 1024)],
    ] as const) {
      const method = path.endsWith("/source") ? "PUT" : "POST";
      const sent = await t.request(method, path, { body, headers: { "content-type": "application/json" } });
      expect([sent.status, sent.body], path).toEqual([
        415,
        { success: false, message: "Unsupported Media Type" },
      ]);
    }
    // No body at all is a form without fields, as a JSON operation reads no body as {}.
    const nothing = await t.request("POST", `${base}/subtitles`);
    expect(nothing.status).toBe(400);
    expect(fieldErrors(nothing.body)).toEqual({
      title: "validation_required",
      language: "validation_required",
      file: "validation_required",
    });
    const noThumbnail = await t.request("POST", `${base}/thumbnails`);
    expect(noThumbnail.status).toBe(400);
    expect(fieldErrors(noThumbnail.body)).toEqual({ file: "validation_required" });
    const noSource = await t.request("PUT", `${base}/source`);
    expect(noSource.status).toBe(400);
    expect(noSource.body.errors).toEqual([
      { field: "file", code: "validation_required", message: "The file field is required." },
    ]);
    const broken = await t.request("POST", `${base}/subtitles`, {
      body: '--xyz\r\nContent-Disposition: form-data; name="title"\r\n\r\nunterminated',
      headers: { "content-type": "multipart/form-data; boundary=xyz" },
    });
    expect(broken.status).toBeGreaterThanOrEqual(400);
    expect(broken.status).toBeLessThan(500);
  });

  it("uploads a thumbnail checked by extension and content", async () => {
    const uploaded = await t.request("POST", `${base}/thumbnails`, {
      body: form({}, { name: "Cover.PNG", content: PNG }),
    });
    expect(uploaded.status, uploaded.text).toBe(200);
    expect(uploaded.body).toEqual({ success: true, message: expect.any(String) });
    const video = await t.request("GET", base);
    const [, , , , libraryId, , videoId] = base.split("/");
    expect(video.body.data.thumbnail_url).toBe(
      `http://127.0.0.1:8081/${libraryId}.media.cumulo.local/${videoId}/thumbnail.jpg`,
    );
    // No source yet: the uploaded image is the video's thumbnail_url (served at once), while
    // thumbnail_count still counts generated thumbnails, none before a source is processed (CONTRACT.md).
    expect(video.body.data).toMatchObject({
      status: "created",
      thumbnail_count: 0,
      manifest_url: "",
      direct_play_url: "",
      preview_animation_thumbnail_url: "",
    });
    const gif = await t.request("POST", `${base}/thumbnails`, {
      body: form({}, { name: "a.gif", content: GIF }),
    });
    expect(gif.status).toBe(200);
    const rows = await t.cumulo.store.db
      .selectFrom("media_thumbnails")
      .selectAll()
      .where("video_id", "=", videoId as string)
      .execute();
    expect(rows.map((r) => r.content_type)).toEqual(["image/gif"]);

    const mismatch = await t.request("POST", `${base}/thumbnails`, {
      body: form({}, { name: "a.jpg", content: PNG }),
    });
    expect(fieldErrors(mismatch.body)).toEqual({ file: "validation_mimes" });
    const wrongExt = await t.request("POST", `${base}/thumbnails`, {
      body: form({}, { name: "a.webp", content: PNG }),
    });
    expect(fieldErrors(wrongExt.body)).toEqual({ file: "validation_mimes" });
    const notImage = await t.request("POST", `${base}/thumbnails`, {
      body: form({}, { name: "a.png", content: "hello" }),
    });
    expect(fieldErrors(notImage.body)).toEqual({ file: "validation_mimes" });
    const missing = await t.request("POST", `${base}/thumbnails`, { body: form({ name: "x" }) });
    expect(fieldErrors(missing.body)).toEqual({ file: "validation_required" });
    const big = await t.request("POST", `${base}/thumbnails`, {
      body: form({}, { name: "a.png", content: Buffer.concat([PNG, Buffer.alloc(5000)]) }),
    });
    expect(big.status).toBe(413);
    const notFound = await t.request(
      "POST",
      `${base.replace(/videos\/.*/, `videos/${MISSING_ID}`)}/thumbnails`,
      {
        body: form({}, { name: "a.png", content: PNG }),
      },
    );
    expect(notFound.status).toBe(404);
  });

  it("names the cause of a file sent as text, and answers the contract's 400 to a field named after an object property", async () => {
    // What `curl -F 'file=<t.png'` sends: the bytes without a filename, which the parser takes as
    // text; it was refused as text holding NUL characters (QA of 4 December, session 41).
    const asText = new FormData();
    asText.set("file", PNG.toString("latin1"));
    const thumbnail = await t.request("POST", `${base}/thumbnails`, { body: asText });
    expect(thumbnail.status).toBe(400);
    expect(thumbnail.body.errors).toEqual([
      { field: "file", code: "validation_required", message: expect.stringMatching(/filename/) },
    ]);
    // Refused as "malformed or cut short", though the body was whole; then with a message of its
    // own, which the contract's 400 does not have.
    const proto = form({ title: "T", language: "en", constructor: "x" }, { name: "a.vtt", content: VTT });
    const subtitle = await t.request("POST", `${base}/subtitles`, { body: proto });
    expect(subtitle.status).toBe(400);
    expect(subtitle.body).toEqual({ success: false, message: "Invalid Request" });
  });

  it("removes a library's files with the library", async () => {
    const lib = await createLibrary(t);
    const video = await createVideo(t, lib.id);
    const path = `/v1/media/libraries/${lib.id}/videos/${video.id}`;
    const created = await t.request("POST", `${path}/subtitles`, {
      body: form({ title: "T", language: "en" }, { name: "a.srt", content: SRT }),
    });
    expect(created.status).toBe(201);
    await t.request("POST", `${path}/thumbnails`, { body: form({}, { name: "a.png", content: PNG }) });
    const blobs = t.cumulo.services.blobs;
    expect(await blobs.exists(created.body.data.path)).toBe(true);
    expect((await t.request("DELETE", `/v1/media/libraries/${lib.id}`)).status).toBe(200);
    expect(await blobs.exists(created.body.data.path)).toBe(false);
    const rows = await t.cumulo.store.db
      .selectFrom("media_subtitles")
      .select("id")
      .where("library_id", "=", lib.id)
      .execute();
    expect(rows).toEqual([]);
  });

  it("finds the video gone (404, never 500) when its deletion removed a file received for it", async () => {
    const lib = await createLibrary(t);
    const video = await createVideo(t, lib.id);
    const { blobs, media } = t.cumulo.services;
    const row = await t.cumulo.store.db
      .selectFrom("media_videos")
      .selectAll()
      .where("id", "=", video.id)
      .executeTakeFirstOrThrow();
    // Received as the route stores them, then the video's deletion removes its whole prefix.
    const received = async (key: string, content: string | Buffer, filename: string) => {
      const stored = await blobs.put(key, Readable.from([Buffer.from(content)]), { maxBytes: 4096 });
      return {
        fields: { title: "English", language: "en" },
        file: { key, filename, sizeBytes: stored.sizeBytes },
      };
    };
    const existing = await media.subtitles.create(
      row,
      await received(media.subtitles.fileKey(row), VTT, "a.vtt"),
    );
    if (existing.outcome !== "created") throw new Error(`subtitle not created: ${existing.outcome}`);
    const thumbnail = await received(media.thumbnails.fileKey(row), PNG, "t.png");
    const subtitle = await received(media.subtitles.fileKey(row), VTT, "en.vtt");
    const replacement = await received(media.subtitles.fileKey(row), VTT, "new.vtt");
    expect((await t.request("DELETE", `/v1/media/libraries/${lib.id}/videos/${video.id}`)).status).toBe(200);
    await waitUntil(
      async () =>
        !(await blobs.exists(thumbnail.file.key)) &&
        !(await blobs.exists(subtitle.file.key)) &&
        !(await blobs.exists(replacement.file.key)),
      5_000,
      "the video's files removed",
    );

    expect(await media.thumbnails.upload(row, thumbnail)).toEqual({ outcome: "not_found" });
    expect(await media.subtitles.create(row, subtitle)).toEqual({ outcome: "not_found" });
    // A new file for a subtitle the video had, received as the video went.
    expect(await media.subtitles.update(video.id, existing.subtitle.id, replacement)).toEqual({
      outcome: "not_found",
    });
  });
});

describe("playback URLs", () => {
  it("are built from the configuration the video is shown under, not the one it was processed under", async () => {
    const store = await createMigratedTestStore();
    try {
      const first = await startTestApp({}, { store });
      const library = await createLibrary(first);
      const video = await createVideo(first, library.id);
      const path = `/v1/media/libraries/${library.id}/videos/${video.id}`;
      const uploaded = await first.request("POST", `${path}/thumbnails`, {
        body: form({}, { name: "cover.png", content: PNG }),
      });
      expect(uploaded.status).toBe(200);
      expect((await first.request("GET", path)).body.data.thumbnail_url).toBe(
        `http://127.0.0.1:8081/${library.id}.media.cumulo.local/${video.id}/thumbnail.jpg`,
      );
      await first.close();

      const moved = await startTestApp(
        { CUMULO_EDGE_URL_STYLE: "host", CUMULO_EDGE_PUBLIC_URL: "https://cdn.example.org" },
        { store },
      );
      try {
        const shown = (await moved.request("GET", path)).body.data;
        expect(shown.thumbnail_url).toBe(
          `https://${library.id}.media.cumulo.local/${video.id}/thumbnail.jpg`,
        );
        // Files the video does not have yet stay without a URL.
        expect([shown.manifest_url, shown.direct_play_url, shown.preview_animation_thumbnail_url]).toEqual([
          "",
          "",
          "",
        ]);
        const listed = await moved.request("GET", `/v1/media/libraries/${library.id}/videos`);
        expect(listed.body.data[0].thumbnail_url).toBe(shown.thumbnail_url);
      } finally {
        await moved.close();
      }
    } finally {
      await store.drop();
    }
  });
});
