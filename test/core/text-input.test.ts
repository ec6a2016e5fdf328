import { randomUUID } from "node:crypto";
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

  it("refuses control characters in single-line names and titles, JSON, form or multipart, on create and update", async () => {
    // C0 (an escape sequence, a tab, a line break), DEL and C1; NUL has its own message (above).
    const controlled = ["\u001b[31mred", "tab\there", "two\nlines", "del\u007f", "c1\u0085next"];
    const format = (field: string) => ({
      field,
      code: "validation_format",
      message: `The ${field} field has an invalid format. It must be text on one line without control characters (U+0000-U+001F, U+007F-U+009F).`,
    });
    const library = (await t.request("POST", "/v1/media/libraries", { json: { name: "Named" } })).body.data;
    const lib = `/v1/media/libraries/${library.id}`;
    const video = (await t.request("POST", `${lib}/videos`, { json: { title: "v" } })).body.data;
    const folder = (await t.request("POST", `${lib}/folders`, { json: { name: "f" } })).body.data;
    const player = (await t.request("POST", `${lib}/players`, { json: { name: "p" } })).body.data;
    const media: [string, string, string][] = [
      ["POST", "/v1/media/libraries", "name"],
      ["PATCH", lib, "name"],
      ["POST", `${lib}/videos`, "title"],
      ["PATCH", `${lib}/videos/${video.id}`, "title"],
      ["POST", `${lib}/folders`, "name"],
      ["PATCH", `${lib}/folders/${folder.id}`, "name"],
      ["POST", `${lib}/players`, "name"],
      ["PATCH", `${lib}/players/${player.id}`, "name"],
      ["POST", `${lib}/webhooks`, "name"],
      ["POST", "/v1/organization/api-keys", "name"],
    ];
    const misses: string[] = [];
    for (const text of controlled) {
      for (const [method, path, field] of media) {
        const extra = path.endsWith("/webhooks")
          ? { url: "https://hooks.example.com/in", events: ["ready"] }
          : {};
        const response = await t.request(method, path, { json: { [field]: text, ...extra } });
        const errors = JSON.stringify(response.body.errors);
        if (response.status !== 400 || errors !== JSON.stringify([format(field)])) {
          misses.push(`${method} ${path} ${JSON.stringify(text)}: ${response.status} ${response.text}`);
        }
      }
      const form = new FormData();
      form.append("title", text);
      form.append("language", "en");
      form.append("file", new Blob(["WEBVTT\n\n00:00.000 --> 00:01.000\nhello\n"]), "captions.vtt");
      const subtitle = await t.request("POST", `${lib}/videos/${video.id}/subtitles`, { body: form });
      expect(subtitle.status).toBe(400);
      expect(subtitle.body.errors).toEqual([format("title")]);
      // Cloud: the VM's name and a disk's display name, as a form and as JSON.
      for (const body of [{ form: { name: text } }, { json: { name: text } }]) {
        const vm = await t.cloud("POST", "/v1/user-resource/vm", body);
        expect(vm.status).toBe(400);
        expect(vm.body).toEqual({ message: "Invalid Request", errors: { name: format("name").message } });
      }
      for (const body of [
        { form: { size_gb: "1", display_name: text } },
        { json: { size_gb: 1, display_name: text } },
      ]) {
        const disk = await t.cloud("POST", "/v1/storage/disks", body);
        expect(disk.status).toBe(400);
        expect(disk.body.errors).toEqual({ display_name: format("display_name").message });
      }
    }
    expect(misses).toEqual([]);
    // Multi-line text keeps its line breaks and tabs; a blank name is still an empty one.
    const described = await t.request("PATCH", lib, { json: { description: "one\r\ntwo\tthree" } });
    expect(described.status).toBe(200);
    expect(described.body.data.description).toBe("one\r\ntwo\tthree");
    const blank = await t.request("POST", "/v1/media/libraries", { json: { name: "\t\n" } });
    expect(blank.body.errors).toEqual([
      { field: "name", code: "validation_min", message: "The name field must not be empty." },
    ]);
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
    // A segment that does not decode is its literal text: a malformed id too (before, the router's
    // decoding failure answered the gateway's "no route" body).
    for (const id of ["%zz", "%FF", "%ED%A0%80", "a%ZZ"]) {
      for (const prefix of ["/v1", "/v1/cloud", "/v1/local-1"]) {
        const undecodable = await t.cloud("GET", `${prefix}/storage/disks/${id}?x=%zz`);
        expect(undecodable.status, `${prefix} ${id}`).toBe(404);
        expect(undecodable.body).toEqual({ message: "Disk not found", errors: { Error: "Disk not found" } });
      }
      const rule = await t.cloud(
        "DELETE",
        `/v1/network/load_balancers/${randomUUID()}/forwarding_rules/${id}`,
      );
      expect(rule.status).toBe(404);
    }
    // An unknown location is still no route, spelt however.
    const location = await t.cloud("GET", "/v1/%zz/storage/disks");
    expect(location.body).toEqual({ message: "no route and no API found with those values" });
  });
});
