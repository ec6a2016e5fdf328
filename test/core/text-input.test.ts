import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";

describe("text input that one store could not keep", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(() => t.close());

  it("refuses NUL characters in JSON bodies, query strings and multipart fields on every store", async () => {
    const body = await t.request("POST", "/v1/media/libraries", {
      json: { name: "a\u0000b", description: "fine" },
    });
    expect(body.status).toBe(400);
    expect(body.body).toEqual({
      success: false,
      message: "Invalid Request",
      errors: [
        {
          field: "name",
          code: "validation_format",
          message: "The name field must not contain NUL characters.",
        },
      ],
    });

    const query = await t.request("GET", "/v1/media/libraries?search=%00");
    expect(query.status).toBe(400);
    expect(query.body.errors[0]).toMatchObject({ field: "search", code: "validation_format" });

    const library = (await t.request("POST", "/v1/media/libraries", { json: { name: "Subtitled" } })).body
      .data;
    const video = (
      await t.request("POST", `/v1/media/libraries/${library.id}/videos`, { json: { title: "v" } })
    ).body.data;
    const form = new FormData();
    form.append("title", "bad\u0000title");
    form.append("language", "en");
    form.append("file", new Blob(["WEBVTT\n\n00:00.000 --> 00:01.000\nhello\n"]), "captions.vtt");
    const multipart = await t.request(
      "POST",
      `/v1/media/libraries/${library.id}/videos/${video.id}/subtitles`,
      { body: form },
    );
    expect(multipart.status).toBe(400);
    expect(multipart.body.errors[0]).toMatchObject({ field: "title", code: "validation_format" });
  });

  it("answers a path that cannot name anything as a malformed id: 404 in the group's body", async () => {
    const library = (await t.request("POST", "/v1/media/libraries", { json: { name: "Paths" } })).body.data;
    for (const path of [`/v1/media/libraries/${library.id}%00`, "/v1/media/libraries/%zz"]) {
      const media = await t.request("GET", path);
      expect(media.status, path).toBe(404);
      expect(media.body, path).toEqual({ success: false, message: "Resource not found" });
    }
    const disk = await t.cloud("GET", "/v1/storage/disks/abc%00");
    expect(disk.status).toBe(404);
    expect(disk.body).toEqual({ message: "Disk not found", errors: { Error: "Disk not found" } });
    const undecodable = await t.cloud("GET", "/v1/storage/disks/%zz");
    expect(undecodable.status).toBe(404);
    expect(undecodable.body).toEqual({ message: "no route and no API found with those values" });
  });
});
