import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLibrary } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";

/** The field errors of a media answer, by field. */
const mediaErrors = (body: { errors?: { field: string; code: string; message: string }[] }) =>
  Object.fromEntries((body.errors ?? []).map(({ field, code, message }) => [field, { code, message }]));

describe("4xx messages say what a field takes", () => {
  let t: TestApp;
  let libraryId: string;
  beforeAll(async () => {
    t = await startTestApp();
    libraryId = (await createLibrary(t)).id;
  });
  afterAll(() => t.close());

  it("names what a refused format should have been, in a body, a query and a cloud form", async () => {
    const security = await t.request("PUT", `/v1/media/libraries/${libraryId}/security`, {
      json: {
        referrers: { action: "allow", values: ["example.com", "not a host!"] },
        countries: { action: "deny", values: ["DE", "ZZ"] },
      },
    });
    expect(security.status).toBe(400);
    expect(mediaErrors(security.body)).toEqual({
      "referrers.values.1": {
        code: "validation_format",
        message:
          "The referrers.values.1 field has an invalid format. It must be a host name such as example.com, optionally starting with *. (*.example.com).",
      },
      "countries.values.1": {
        code: "validation_format",
        message:
          "The countries.values.1 field has an invalid format. It must be an officially assigned ISO 3166-1 alpha-2 country code such as DE or US.",
      },
    });

    const player = await t.request("POST", `/v1/media/libraries/${libraryId}/players`, {
      json: { name: "Player", theme: { primary_color: "red", controls: ["play", "mute", "play"] } },
    });
    expect(mediaErrors(player.body)).toEqual({
      "theme.primary_color": {
        code: "validation_format",
        message:
          "The theme.primary_color field has an invalid format. It must be a hex colour such as #3b82f6 or #fff.",
      },
      "theme.controls": {
        code: "validation_format",
        message: "The theme.controls field must not list the same value twice (items 0 and 2 are equal).",
      },
    });

    const videos = await t.request("GET", `/v1/media/libraries/${libraryId}/videos?folder_id=nope`);
    expect(mediaErrors(videos.body).folder_id?.message).toBe(
      "The folder_id field has an invalid format. It must be a UUID such as 3f2b8c1e-5d4a-4c7b-9e2f-1a2b3c4d5e6f.",
    );
    // The same words whether the schema or the route refuses the time.
    const times =
      "It must be an ISO 8601 timestamp such as 2026-11-21T08:30:00Z, or a date such as 2026-11-21.";
    const libraries = await t.request("GET", "/v1/media/libraries?created_after=yesterday");
    expect(mediaErrors(libraries.body).created_after?.message).toBe(
      `The created_after field has an invalid format. ${times}`,
    );
    const outOfRange = await t.request("GET", "/v1/media/libraries?created_before=2026-02-30");
    expect(mediaErrors(outOfRange.body).created_before).toEqual({
      code: "validation_format",
      message: `The created_before field has an invalid format. ${times}`,
    });

    const distribution = await t.request("POST", "/v1/cdn/distributions", {
      json: { hostname: "bad host!", origin_url: "ftp://origin.example.com" },
    });
    expect(mediaErrors(distribution.body)).toEqual({
      hostname: {
        code: "validation_format",
        message: "The hostname field has an invalid format. It must be a host name such as cdn.example.com.",
      },
      origin_url: {
        code: "validation_format",
        message:
          "The origin_url field has an invalid format. It must be an http or https URL such as https://origin.example.com.",
      },
    });

    // The cloud group: the same words in its own body shape, from a form as from JSON.
    const rule = { "forwarding_rules[0][source_port]": "80", "forwarding_rules[0][target_port]": "80" };
    const fromForm = await t.cloud("POST", "/v1/network/load_balancers", {
      form: { ...rule, "forwarding_rules[0][protocol]": "UDP" },
    });
    const fromJson = await t.cloud("POST", "/v1/network/load_balancers", {
      json: { forwarding_rules: [{ source_port: 80, target_port: 80, protocol: "UDP" }] },
    });
    for (const answer of [fromForm, fromJson]) {
      expect(answer.status).toBe(400);
      expect(answer.body).toEqual({
        message: "Invalid Request",
        errors: {
          "forwarding_rules.0.protocol":
            "The forwarding_rules.0.protocol field has an invalid format. It must be TCP.",
        },
      });
    }
  });

  it("words a format the same whether the schema or the route's own check refuses it", async () => {
    const webhooks = `/v1/media/libraries/${libraryId}/webhooks`;
    const hook = (url: string) => ({ name: "Hook", url, events: ["ready"] });
    // "ftp://" fails the schema's pattern; "http://a:b:c/" passes it and fails the URL parser.
    const [byPattern, byParser] = await Promise.all(
      ["ftp://example.com/hook", "http://a:b:c/"].map((url) =>
        t.request("POST", webhooks, { json: hook(url) }),
      ),
    );
    expect(mediaErrors(byParser.body)).toEqual(mediaErrors(byPattern.body));
    expect(mediaErrors(byParser.body).url).toEqual({
      code: "validation_format",
      message:
        "The url field has an invalid format. It must be an http or https URL without spaces, such as https://example.com/webhooks.",
    });
    const origin = (origin_url: string) => ({ hostname: "words.example.com", origin_url });
    const [originByPattern, originByParser] = await Promise.all(
      ["ftp://origin.example.com", "http://a:b:c/"].map((url) =>
        t.request("POST", "/v1/cdn/distributions", { json: origin(url) }),
      ),
    );
    expect(mediaErrors(originByParser.body)).toEqual(mediaErrors(originByPattern.body));
    // A private address is refused in the same words for an origin as for a webhook.
    const [privateOrigin, privateHook] = await Promise.all([
      t.request("POST", "/v1/cdn/distributions", { json: origin("http://10.0.0.1/") }),
      t.request("POST", webhooks, { json: hook("http://10.0.0.1/") }),
    ]);
    expect(mediaErrors(privateOrigin.body).origin_url?.message).toBe(
      "The origin_url field must reach a public address: 10.0.0.1 is not a public address.",
    );
    expect(mediaErrors(privateHook.body).url?.message).toBe(
      "The url field must reach a public address: 10.0.0.1 is not a public address.",
    );

    // A multipart field's format error reads as a JSON field's.
    const video = await t.request("POST", `/v1/media/libraries/${libraryId}/videos`, {
      json: { title: "V" },
    });
    const form = new FormData();
    form.append("title", "English");
    form.append("language", "not a tag");
    form.append("file", new Blob(["WEBVTT\n\n00:00.000 --> 00:01.000\nHi\n"]), "en.vtt");
    const subtitle = await t.request(
      "POST",
      `/v1/media/libraries/${libraryId}/videos/${video.body.data.id}/subtitles`,
      { body: form },
    );
    expect(mediaErrors(subtitle.body)).toEqual({
      language: {
        code: "validation_format",
        message:
          "The language field has an invalid format. It must be a well-formed BCP 47 language tag such as en, pt-BR or zh-Hans.",
      },
    });
  });

  it("names every type a nullable field takes", async () => {
    const folder = await t.request("POST", `/v1/media/libraries/${libraryId}/folders`, {
      json: { name: "Folder", parent_id: 5 },
    });
    expect(folder.status).toBe(400);
    expect(mediaErrors(folder.body)).toEqual({
      parent_id: { code: "validation_type", message: "The parent_id field must be of type string or null." },
    });
    const webhook = await t.request("POST", `/v1/media/libraries/${libraryId}/webhooks`, {
      json: { name: "Hook", url: "https://example.com/hook", events: ["ready"], headers: "x" },
    });
    expect(mediaErrors(webhook.body)).toEqual({
      headers: { code: "validation_type", message: "The headers field must be of type object or null." },
    });
  });

  it("answers a query key given twice as given more than once, for a listed value as for a number", async () => {
    const answer = await t.request(
      "GET",
      `/v1/media/libraries/${libraryId}/videos?status=ready&status=failed&limit=1&limit=2`,
    );
    expect(answer.status).toBe(400);
    expect(mediaErrors(answer.body)).toEqual({
      status: { code: "validation_type", message: "The status field must be given once." },
      limit: { code: "validation_type", message: "The limit field must be given once." },
    });
    // The same in the cloud group's body shape; a single wrong value still names the type.
    const cloud = await t.cloud("GET", "/v1/network/ip_addresses?billing_account_id=1&billing_account_id=2");
    expect(cloud.body).toEqual({
      message: "Invalid Request",
      errors: { billing_account_id: "The billing_account_id field must be given once." },
    });
    // A cloud form is read like a query; a JSON list where text belongs is the wrong type.
    const form = await t.cloud("POST", "/v1/network/load_balancers", {
      body: "display_name=a&display_name=b",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(form.body.errors).toEqual({ display_name: "The display_name field must be given once." });
    const json = await t.cloud("POST", "/v1/network/load_balancers", { json: { display_name: ["a", "b"] } });
    expect(json.body.errors).toEqual({ display_name: "The display_name field must be of type string." });
    const once = await t.request("GET", `/v1/media/libraries/${libraryId}/videos?limit=ten`);
    expect(mediaErrors(once.body).limit?.message).toBe("The limit field must be of type integer.");
  });
});
