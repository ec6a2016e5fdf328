import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { header, type Receiver, startReceiver } from "./helpers.ts";

/** Read-only keys never see signing secrets (docs/security.md, "Read-only keys and secrets"). */
describe("webhook endpoint secret and read-only keys", () => {
  let t: TestApp;
  let echo: Receiver;
  /** What the echoing receiver answered, and the signing secrets it says it expects (a debug page's kind of answer). */
  const answered: string[] = [];
  let expectedSecrets: string[] = [];
  beforeAll(async () => {
    t = await startTestApp({ CUMULO_WEBHOOK_ALLOW_PRIVATE: "true" });
    echo = await startReceiver((request, res) => {
      const body = JSON.stringify({
        received: request.path,
        headers: request.headers,
        expected: expectedSecrets,
        check: expectedSecrets.map(
          (secret) => `https://verify.example/?secret=${encodeURIComponent(secret)}`,
        ),
      });
      answered.push(body);
      res.writeHead(401, { "content-type": "application/json" }).end(body);
    });
  });
  afterAll(async () => {
    await t.close();
    await echo.close();
  });

  /** An organization with its admin key, a read-only key and the webhooks path of a library of its own. */
  async function organizationWithReadOnlyKey(name: string) {
    const org = await t.createOrganization(name);
    const created = await t.cumulo.services.identity.createApiKey(org.organizationId, {
      name: "ro",
      readOnly: true,
    });
    if (created.outcome !== "created") throw new Error("key not created");
    const library = (await t.request("POST", "/v1/media/libraries", { key: org.key, json: { name: "L" } }))
      .body.data;
    return { admin: org.key, readOnly: created.api_key, path: `/v1/media/libraries/${library.id}/webhooks` };
  }

  it("answers the secret as null and masks header values for a read-only key, in the endpoint, the list and the deliveries", async () => {
    const { admin, readOnly, path } = await organizationWithReadOnlyKey("Hooked");
    const endpoint = (
      await t.request("POST", path, {
        key: admin,
        json: {
          name: "Primary",
          url: "https://hooks.example.com/in",
          events: ["*"],
          headers: { Authorization: "Bearer receiver-secret", "X-Tenant": "42" },
        },
      })
    ).body.data;
    expect(endpoint.secret).toMatch(/^whsec_/);

    const one = await t.request("GET", `${path}/${endpoint.id}`, { key: readOnly });
    expect(one.status).toBe(200);
    const masked = { ...endpoint, secret: null, headers: { Authorization: "***", "X-Tenant": "***" } };
    expect(one.body.data).toEqual(masked);
    const list = await t.request("GET", path, { key: readOnly });
    expect(list.body.data).toEqual([masked]);
    expect((await t.request("GET", `${path}/${endpoint.id}`, { key: admin })).body.data).toEqual(endpoint);

    const queued = await t.request("POST", `${path}/${endpoint.id}/test`, { key: admin });
    expect(queued.status).toBe(202);
    // The test send is attempted by the worker; wait for its record, then read it with each key.
    await expect
      .poll(
        async () =>
          (await t.request("GET", `${path}/${endpoint.id}/events`, { key: admin })).body.data.length,
      )
      .toBeGreaterThan(0);
    const asAdmin = (await t.request("GET", `${path}/${endpoint.id}/events`, { key: admin })).body.data;
    expect(asAdmin[0].webhook_endpoint.secret).toBe(endpoint.secret);
    const asReader = (await t.request("GET", `${path}/${endpoint.id}/events`, { key: readOnly })).body.data;
    expect(asReader[0].webhook_endpoint.secret).toBeNull();
    expect(asReader[0].webhook_endpoint.headers).toEqual(masked.headers);
  });

  it("masks credentials in the endpoint URL's query for a read-only key, the rest of the URL as written", async () => {
    const { admin, readOnly, path } = await organizationWithReadOnlyKey("Hooked by URL");
    // A receiver that checks a token in its URL (as many do) rather than the signature.
    const url =
      "https://hooks.example.com/in?token=receiver-secret&tenant=42&sortkey=title&accessKey=receiver-key#part";
    const endpoint = (
      await t.request("POST", path, { key: admin, json: { name: "By URL", url, events: ["*"] } })
    ).body.data;
    expect(endpoint.url).toBe(url);

    // Names are compared by words: `sortkey` is no key's name, `accessKey` is.
    const shown = "https://hooks.example.com/in?token=***&tenant=42&sortkey=title&accessKey=***#part";
    const one = await t.request("GET", `${path}/${endpoint.id}`, { key: readOnly });
    expect(one.body.data.url).toBe(shown);
    expect((await t.request("GET", path, { key: readOnly })).body.data[0].url).toBe(shown);
    expect(one.text).not.toContain("receiver-secret");
    expect(one.text).not.toContain("receiver-key");
    expect((await t.request("GET", `${path}/${endpoint.id}`, { key: admin })).body.data.url).toBe(url);
  });

  it("masks a secret in the endpoint URL's path (Slack, Discord, a long generated segment) for a read-only key", async () => {
    const { admin, readOnly, path } = await organizationWithReadOnlyKey("Hooked by path");
    // Whoever holds one of these URLs can post to the channel: the token is in the path.
    const urls = {
      "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX":
        "https://hooks.slack.com/services/T000/B000/***",
      "https://discord.com/api/webhooks/1234567890123456789/Xy_9-abcDEFghiJKLmnoPQRstuVWXyz0123456789abcdefGHIJ":
        "https://discord.com/api/webhooks/1234567890123456789/***",
      "https://discord.com/api/v10/webhooks/123/short-token/slack":
        "https://discord.com/api/v10/webhooks/123/***/slack",
      "https://hooks.zapier.com/hooks/catch/123456/abc1234/":
        "https://hooks.zapier.com/hooks/catch/123456/***/",
      "https://maker.ifttt.com/trigger/uploaded/with/key/dE3fgHIjk":
        "https://maker.ifttt.com/trigger/uploaded/with/key/***",
      // Any other service: a generated-looking segment (a long mix of letters and digits, a UUID).
      "https://chat.example.com/hooks/xj7mf93bkdgtzbqoyzkc6n4o8a/in?tenant=42":
        "https://chat.example.com/hooks/***/in?tenant=42",
      "https://webhook.site/3f2a9c1e-1b2c-4d5e-8f90-123456789abc": "https://webhook.site/***",
      "https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/sendMessage":
        "https://api.telegram.org/***/sendMessage",
      // Words, numbers and slugs stay readable.
      "https://hooks.example.com/hooks/video-events": "https://hooks.example.com/hooks/video-events",
      "https://hooks.example.com/api/v1/notify": "https://hooks.example.com/api/v1/notify",
      "https://hooks.example.com/2024-06-01/h264-1080p/events/42":
        "https://hooks.example.com/2024-06-01/h264-1080p/events/42",
    };
    for (const [url, shown] of Object.entries(urls)) {
      const endpoint = (
        await t.request("POST", path, { key: admin, json: { name: "By path", url, events: ["*"] } })
      ).body.data;
      expect(endpoint.url).toBe(url);
      const one = await t.request("GET", `${path}/${endpoint.id}`, { key: readOnly });
      expect(one.body.data.url).toBe(shown);
      const listed = await t.request("GET", path, { key: readOnly });
      expect(listed.body.data.find((item: { id: number }) => item.id === endpoint.id).url).toBe(shown);
      expect((await t.request("GET", `${path}/${endpoint.id}`, { key: admin })).body.data.url).toBe(url);
    }
  });

  it("masks the endpoint's secret values in what a receiver that echoes the request answered, for a read-only key", async () => {
    const { admin, readOnly, path } = await organizationWithReadOnlyKey("Echoed");
    const pathSecret = "xj7mf93bkdgtzbqoyzkc6n4o8a";
    const urlToken = "url-token-of-the-receiver";
    const apiKeyInUrl = "cmk_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG";
    const headerToken = "header-token-of-the-receiver";
    const endpoint = (
      await t.request("POST", path, {
        key: admin,
        json: {
          name: "Echo",
          url: `${echo.url}/in/${pathSecret}?token=${urlToken}&tenant=42&from=${apiKeyInUrl}`,
          events: ["*"],
          headers: { Authorization: `Bearer ${headerToken}`, "X-Tenant": "42" },
        },
      })
    ).body.data;
    // A rotation with an overlap: deliveries are signed with both, and both are the endpoint's secrets.
    const rotated = await t.request("POST", `${path}/${endpoint.id}/rotate-secret`, {
      key: admin,
      json: { previous_secret_expires_in_s: 3600 },
    });
    expect(rotated.status, rotated.text).toBe(200);
    expectedSecrets = [rotated.body.data.secret, endpoint.secret];
    const secrets = [
      pathSecret,
      urlToken,
      apiKeyInUrl,
      headerToken,
      ...expectedSecrets,
      ...expectedSecrets.map((secret) => secret.slice("whsec_".length)),
      ...expectedSecrets.map(encodeURIComponent),
    ];

    expect((await t.request("POST", `${path}/${endpoint.id}/test`, { key: admin })).status).toBe(202);
    const events = `${path}/${endpoint.id}/events`;
    await expect
      .poll(async () => (await t.request("GET", events, { key: admin })).body.data.length)
      .toBeGreaterThan(0);
    const asAdmin = (await t.request("GET", events, { key: admin })).body.data[0];
    expect(asAdmin.response_status).toBe(401);
    expect(asAdmin.response_body).toBe(answered.at(-1));
    for (const secret of secrets) expect(asAdmin.response_body).toContain(secret);

    const asReader = await t.request("GET", events, { key: readOnly });
    expect(asReader.status).toBe(200);
    for (const secret of secrets) expect(asReader.text).not.toContain(secret);
    const shown = JSON.parse(asReader.body.data[0].response_body);
    expect(shown.received).toBe("/in/***?token=***&tenant=42&from=***");
    expect(shown.headers.authorization).toBe("***");
    expect(shown.headers["x-tenant"]).toBe("42");
    expect(shown.headers["webhook-id"]).toBe(JSON.parse(asAdmin.response_body).headers["webhook-id"]);
    expect(shown.expected).toEqual(["***", "***"]);
    expect(shown.check).toEqual(["https://verify.example/?secret=***", "https://verify.example/?secret=***"]);
  });

  /** Sends a test notification to the endpoint and answers its delivery as the admin and the reader read it. */
  async function firstDelivery(keys: { admin: string; readOnly: string; path: string }, endpointId: string) {
    const events = `${keys.path}/${endpointId}/events`;
    expect((await t.request("POST", `${keys.path}/${endpointId}/test`, { key: keys.admin })).status).toBe(
      202,
    );
    await expect
      .poll(async () => (await t.request("GET", events, { key: keys.admin })).body.data.length)
      .toBeGreaterThan(0);
    const asReader = await t.request("GET", events, { key: keys.readOnly });
    expect(asReader.status).toBe(200);
    return {
      asAdmin: (await t.request("GET", events, { key: keys.admin })).body.data[0],
      asReader: asReader.body.data[0],
      readerText: asReader.text,
    };
  }

  it("masks the endpoint's secrets re-encoded by the receiver (percent, base64, base64url, hex, JSON and HTML escapes, decoded Basic credentials)", async () => {
    const keys = await organizationWithReadOnlyKey("Re-encoded");
    const headerToken = "header+token/of=the-receiver";
    const urlToken = "url-token-of-the-receiver";
    const upstream = "ann:upstream-password";
    const b64 = (text: string) => Buffer.from(text).toString("base64");
    let signingSecret = "";
    // A receiver's debug page that prints what it got in every encoding a framework might use.
    const receiver = await startReceiver((request, res) => {
      const token = new URL(request.path, "http://receiver").searchParams.get("token") ?? "";
      const bearer = header(request.headers.authorization).replace(/^Bearer /, "");
      const basic = Buffer.from(
        header(request.headers["x-upstream-authorization"]).replace(/^Basic /, ""),
        "base64",
      ).toString();
      const lines = {
        percent: encodeURIComponent(bearer),
        base64: b64(bearer),
        base64url: Buffer.from(token).toString("base64url"),
        hex: Buffer.from(bearer).toString("hex"),
        hexUpper: Buffer.from(token).toString("hex").toUpperCase(),
        // A JSON encoder that writes `+` as \u002B (.NET's), `/` as \/ (PHP's), here `_` as \u005f too.
        json: signingSecret.replaceAll("+", "\\u002B").replaceAll("/", "\\/").replace("_", "\\u005f"),
        html: bearer.replaceAll("+", "&#43;").replaceAll("/", "&#x2F;").replaceAll("=", "&#61;"),
        basic,
        password: basic.slice(basic.indexOf(":") + 1),
        // The token inside a longer base64 text, at each of the three alignments to its 3-byte groups.
        embedded0: b64(`{"t":"${bearer}"}`),
        embedded1: b64(`{"to":"${bearer}"}`),
        embedded2: b64(`{"tok":"${bearer}"}`),
      };
      res.writeHead(400, { "content-type": "text/plain" });
      res.end(
        Object.entries(lines)
          .map(([name, value]) => `${name}: ${value}`)
          .join("\n"),
      );
    });
    try {
      const endpoint = (
        await t.request("POST", keys.path, {
          key: keys.admin,
          json: {
            name: "Debug page",
            url: `${receiver.url}/in?token=${urlToken}&tenant=42`,
            events: ["*"],
            headers: {
              Authorization: `Bearer ${headerToken}`,
              "X-Upstream-Authorization": `Basic ${b64(upstream)}`,
              "X-Tenant": "42",
            },
          },
        })
      ).body.data;
      signingSecret = endpoint.secret;
      const { asAdmin, asReader, readerText } = await firstDelivery(keys, endpoint.id);
      const sent = Object.fromEntries(
        asAdmin.response_body.split("\n").map((line: string) => line.split(": ")),
      );
      expect(sent.base64).toBe(b64(headerToken));
      expect(sent.password).toBe("upstream-password");
      expect(sent.json).toMatch(/^whsec\\u005f/);

      const shown = Object.fromEntries(
        asReader.response_body.split("\n").map((line: string) => line.split(": ")),
      );
      for (const name of [
        "percent",
        "base64",
        "base64url",
        "hex",
        "hexUpper",
        "json",
        "html",
        "basic",
        "password",
      ]) {
        expect(shown[name], name).toBe("***");
      }
      // Only the characters the token shares with its neighbours are left (6 bits each).
      for (const name of ["embedded0", "embedded1", "embedded2"]) {
        expect(shown[name], name).toMatch(/^[A-Za-z\d+/]{0,12}\*\*\*[A-Za-z\d+/=]{0,8}$/);
        expect(Buffer.from(shown[name].replace("***", ""), "base64").toString()).not.toContain("receiver");
      }
      for (const value of Object.values(sent)) expect(readerText).not.toContain(value);
    } finally {
      await receiver.close();
    }
  });

  it("masks a header credential of Latin-1 letters repeated as the bytes it was sent in (read back as U+FFFD), and their hex, base64 and percent forms", async () => {
    const keys = await organizationWithReadOnlyKey("Latin-1");
    const token = "Geheimnis-für-Küche-2024";
    // The value's bytes as they arrived (Node reads header bytes as Latin-1), echoed raw and re-encoded.
    const receiver = await startReceiver((request, res) => {
      const bytes = Buffer.from(header(request.headers.authorization).replace(/^Bearer /, ""), "latin1");
      res.writeHead(400, { "content-type": "text/plain" });
      res.end(
        Buffer.concat([
          Buffer.from("raw: "),
          bytes,
          Buffer.from(
            `\nhex: ${bytes.toString("hex")}\nbase64: ${bytes.toString("base64")}\npercent: ${[...bytes].map((byte) => (byte < 0x80 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase()}`)).join("")}`,
          ),
        ]),
      );
    });
    try {
      const endpoint = (
        await t.request("POST", keys.path, {
          key: keys.admin,
          json: {
            name: "Raw echo",
            url: `${receiver.url}/in`,
            events: ["*"],
            headers: { Authorization: `Bearer ${token}` },
          },
        })
      ).body.data;
      const { asAdmin, asReader } = await firstDelivery(keys, endpoint.id);
      expect(asAdmin.response_body).toContain("raw: Geheimnis-f\uFFFDr-K\uFFFDche-2024\n");
      expect(asAdmin.response_body).toContain("percent: Geheimnis-f%FCr-K%FCche-2024");
      // Before, only the UTF-8 forms were looked for: these four were shown as sent.
      expect(asReader.response_body).toBe("raw: ***\nhex: ***\nbase64: ***\npercent: ***");
    } finally {
      await receiver.close();
    }
  });

  it("masks a Basic password encoded in Latin-1, and a header value repeated without the blanks around it", async () => {
    const keys = await organizationWithReadOnlyKey("Basic Latin-1");
    const password = "pässwörd-of-the-upstream";
    const basic = Buffer.from(`ann:${password}`, "latin1").toString("base64");
    // What the receiver decoded and repeated: the password's Latin-1 bytes in hex, and the padded value.
    const receiver = await startReceiver((request, res) => {
      const decoded = Buffer.from(header(request.headers.authorization).replace(/^Basic /, ""), "base64");
      const passwordBytes = decoded.subarray(decoded.indexOf(":") + 1);
      res.writeHead(400, { "content-type": "text/plain" });
      res.end(`hex: ${passwordBytes.toString("hex")}\ntoken: ${header(request.headers["x-token"])}`);
    });
    try {
      const endpoint = (
        await t.request("POST", keys.path, {
          key: keys.admin,
          json: {
            name: "Basic",
            url: `${receiver.url}/in`,
            events: ["*"],
            headers: { Authorization: `Basic ${basic}`, "X-Token": "  padded-secret-token  " },
          },
        })
      ).body.data;
      const { asAdmin, asReader } = await firstDelivery(keys, endpoint.id);
      expect(asAdmin.response_body).toBe(
        `hex: ${Buffer.from(password, "latin1").toString("hex")}\ntoken: padded-secret-token`,
      );
      // Before, both were shown: the password was looked for in UTF-8, the value with its blanks.
      expect(asReader.response_body).toBe("hex: ***\ntoken: ***");
    } finally {
      await receiver.close();
    }
  });

  it("shows a reader none of a receiver's answer when a secret of the endpoint is too short to look for", async () => {
    const keys = await organizationWithReadOnlyKey("Short secrets");
    const echoHeaders = await startReceiver((request, res) => {
      res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify(request.headers));
    });
    try {
      const endpoints = {
        "a credential header of 2 characters": {
          url: `${echoHeaders.url}/in`,
          headers: { "X-Api-Key": "k9", "X-Tenant": "42" },
        },
        "a URL credential of 1 character": { url: `${echoHeaders.url}/in?key=7`, headers: null },
      };
      for (const [name, fields] of Object.entries(endpoints)) {
        const endpoint = (
          await t.request("POST", keys.path, { key: keys.admin, json: { name, ...fields, events: ["*"] } })
        ).body.data;
        const { asAdmin, asReader } = await firstDelivery(keys, endpoint.id);
        expect(JSON.parse(asAdmin.response_body)["user-agent"], name).toMatch(/^Cumulo-Webhooks/);
        expect(asReader.response_body, name).toBe("***");
      }
      // A setting of 2 characters under a name that is no credential's is no secret: the answer is shown.
      const settingOnly = (
        await t.request("POST", keys.path, {
          key: keys.admin,
          json: {
            name: "Setting",
            url: `${echoHeaders.url}/in`,
            events: ["*"],
            headers: { "X-Tenant": "42" },
          },
        })
      ).body.data;
      const { asReader } = await firstDelivery(keys, settingOnly.id);
      expect(JSON.parse(asReader.response_body)["x-tenant"]).toBe("42");
    } finally {
      await echoHeaders.close();
    }
  });
});
