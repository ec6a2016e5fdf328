import { once } from "node:events";
import { connect } from "node:net";
import { setTimeout as pause } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";
import { capturingLogger, errorLines } from "./log-capture.ts";
import { parseAnswer, RawConnection, sendRaw } from "./raw-http.ts";

const nested = (depth: number): string => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;

function multipartRequest(path: string, key: string, body: string, headers: Record<string, string> = {}) {
  const head = Object.entries({
    host: "localhost",
    authorization: `Bearer ${key}`,
    "content-type": "multipart/form-data; boundary=zzz",
    "content-length": String(Buffer.byteLength(body)),
    ...headers,
  })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  return `POST ${path} HTTP/1.1\r\n${head}\r\n${body}`;
}

describe("hostile input", () => {
  let t: TestApp;
  let videoPath: string;
  const { logger, lines } = capturingLogger();

  beforeAll(async () => {
    t = await startTestApp(
      {
        CUMULO_MAX_JSON_DEPTH: "32",
        CUMULO_MULTIPART_MAX_PARTS: "10",
        CUMULO_MAX_CONCURRENT_UPLOADS: "1",
        // The upload-slot tests probe in a loop until the slot is taken or free: the request rate
        // limit, whose 429 would look like a taken slot, must not run out on a fast store.
        CUMULO_RATE_LIMIT: "1000000/60s",
        CUMULO_EDGE_PORT: "0",
      },
      { logger },
    );
    const library = (await t.request("POST", "/v1/media/libraries", { json: { name: "L" } })).body.data;
    const video = (
      await t.request("POST", `/v1/media/libraries/${library.id}/videos`, { json: { title: "V" } })
    ).body.data;
    videoPath = `/v1/media/libraries/${library.id}/videos/${video.id}`;
  });
  afterAll(() => t.close());

  const probeUpload = () =>
    t.request("POST", `${videoPath}/subtitles`, {
      body: "--zzz--\r\n",
      headers: { "content-type": "multipart/form-data; boundary=zzz" },
    });

  /**
   * Starts an upload that never finishes and returns once it holds the key's only upload slot (a
   * probe upload is refused with 429); the two race for the slot, so a lost race starts over. A probe
   * holds the slot while it is served, so probes pause between them, longer after each lost race: on
   * a busy machine, back-to-back probes kept the slot from the new connection every time.
   */
  const stalledUpload = (method: string, path: string): Promise<RawConnection> =>
    stalledRequest(
      multipartRequest(path, t.adminKey, "", { "content-length": "100000" }).replace("POST", method) +
        `--zzz\r\nContent-Disposition: form-data; name="file"; filename="a.vtt"\r\n\r\nWEBVTT\n${"x".repeat(5000)}`,
    );

  /** `stalledUpload` for any request that sends part of its body and stalls. */
  async function stalledRequest(request: string): Promise<RawConnection> {
    for (let attempt = 1; ; attempt++) {
      const pauseMs = Math.min(10 * attempt, 200);
      const connection = await RawConnection.open(t.baseUrl);
      connection.write(request);
      await pause(pauseMs);
      let probe = await probeUpload();
      while (probe.status !== 429 && connection.received === "") {
        await pause(pauseMs);
        probe = await probeUpload();
      }
      if (probe.status === 429 && connection.received === "") return connection;
      connection.close();
      await connection.closed;
    }
  }

  /** Waits until the key's upload slot is free again. */
  async function slotFreed() {
    let probe = await probeUpload();
    while (probe.status === 429) probe = await probeUpload();
    return probe;
  }

  it("answers a JSON body nested past the configured depth with 400 Invalid Request in each group's shape", async () => {
    const media = await t.request("POST", "/v1/media/libraries", {
      body: `{"name":"x","description":${nested(5000)}}`,
      headers: { "content-type": "application/json" },
    });
    expect(media.status).toBe(400);
    expect(media.body).toEqual({ success: false, message: "Invalid Request" });
    const cloud = await t.cloud("POST", "/v1/user-resource/token", {
      body: nested(33),
      headers: { "content-type": "application/json" },
    });
    expect(cloud.status).toBe(400);
    expect(cloud.body).toEqual({ message: "Invalid Request", errors: { Error: "Invalid Request" } });
    // At the limit the body is read as usual (here: a wrong type for the field).
    const within = await t.request("POST", "/v1/media/libraries", {
      body: `{"name":${nested(31)}}`,
      headers: { "content-type": "application/json" },
    });
    expect(within.status).toBe(400);
    expect(within.body.errors[0]).toMatchObject({ field: "name", code: "validation_type" });
  });

  it("answers a cloud form nested past the depth, in its brackets or in a field's JSON text, with 400 Invalid Request", async () => {
    const invalid = { message: "Invalid Request", errors: { Error: "Invalid Request" } };
    const before = lines.length;
    // A list of objects may come as JSON text in a form field: its nesting counts as a JSON body's.
    const jsonText = await t.cloud("POST", "/v1/network/load_balancers", {
      form: { name: "lb", targets: `[${nested(20_000)}]` },
    });
    expect(jsonText.status).toBe(400);
    expect(jsonText.body).toEqual(invalid);
    // So does the nesting written in a field name's brackets.
    const brackets = await t.cloud("POST", "/v1/network/load_balancers", {
      form: { name: "lb", [`targets${"[0]".repeat(20_000)}`]: "1" },
    });
    expect(brackets.status).toBe(400);
    expect(brackets.body).toEqual(invalid);
    expect(errorLines(lines.slice(before))).toEqual([]);
    // Within the limit the form is read as usual (here: a target that names nothing).
    const within = await t.cloud("POST", "/v1/network/load_balancers", {
      form: { name: "lb", targets: `[${nested(30)}]` },
    });
    expect(within.status).toBe(400);
    expect(within.body).not.toEqual(invalid);
  });

  it("refuses NUL and unpaired surrogates inside the JSON text of a cloud form field, as in any field", async () => {
    const before = lines.length;
    const sent = async (keys: string) =>
      t.cloud("POST", "/v1/user-resource/vm", { form: { name: "vm", public_keys: keys } });
    const nul = await sent('["ssh-ed25519 AAAA\\u0000x"]');
    expect(nul.status).toBe(400);
    expect(nul.body).toEqual({
      message: "Invalid Request",
      errors: { "public_keys.0": "The public_keys.0 field must not contain NUL characters." },
    });
    const surrogate = await sent('["ok", "k\\ud800y"]');
    expect(surrogate.status).toBe(400);
    expect(Object.keys(surrogate.body.errors)).toEqual(["public_keys.1"]);
    expect(errorLines(lines.slice(before))).toEqual([]);
    // Nothing was created by either.
    const vms = await t.cloud("GET", "/v1/user-resource/vm/list");
    expect(vms.body.map((vm: { name: string }) => vm.name)).not.toContain("vm");
  });

  it("refuses unpaired surrogates in bodies, queries and multipart fields, as NUL is refused", async () => {
    const body = await t.request("POST", "/v1/media/libraries", {
      body: '{"name":"a\\ud800b"}',
      headers: { "content-type": "application/json" },
    });
    expect(body.status).toBe(400);
    expect(body.body.errors).toEqual([
      {
        field: "name",
        code: "validation_format",
        message: "The name field must not contain unpaired UTF-16 surrogates.",
      },
    ]);
    const low = await t.request("POST", "/v1/media/libraries", {
      body: '{"name":"ok","description":"\\udc00"}',
      headers: { "content-type": "application/json" },
    });
    expect(low.body.errors[0]).toMatchObject({ field: "description", code: "validation_format" });
    const paired = await t.request("POST", "/v1/media/libraries", { json: { name: "a\ud83d\ude00b" } });
    expect(paired.status).toBe(201);
    expect(paired.body.data.name).toBe("a😀b");

    // A surrogate encoded as UTF-8 bytes is invalid UTF-8, read as U+FFFD: stored as read, never a 5xx.
    const query = await t.request("GET", "/v1/media/libraries?search=%ED%A0%80");
    expect(query.status).toBe(200);
    expect(query.body.meta.links.self).toContain("search=%EF%BF%BD%EF%BF%BD%EF%BF%BD");
    // Read the same way in a query and a form body: invalid bytes become U+FFFD, the valid ones
    // around them are decoded, and a % without two hex digits stays as sent.
    await t.request("POST", "/v1/media/libraries", { json: { name: "bytes \ufffd é" } });
    const found = await t.request("GET", "/v1/media/libraries?search=%FF+%C3%A9");
    expect(found.body.data.map((library: { name: string }) => library.name)).toEqual(["bytes \ufffd é"]);
    const form = await t.cloud("POST", "/v1/user-resource/token", {
      body: "billing_account_id=1&description=%FFab+%C3%A9+%zz",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(form.status).toBe(200);
    expect(form.body[0].description).toBe("\ufffdab é %zz");
    const raw = Buffer.concat([
      Buffer.from('--zzz\r\nContent-Disposition: form-data; name="title"\r\n\r\nbad'),
      Buffer.from([0xed, 0xa0, 0x80]),
      Buffer.from(
        '\r\n--zzz\r\nContent-Disposition: form-data; name="language"\r\n\r\nen\r\n--zzz\r\nContent-Disposition: form-data; name="file"; filename="a.vtt"\r\n\r\nWEBVTT\n\n00:00.000 --> 00:01.000\nhi\n\r\n--zzz--\r\n',
      ),
    ]);
    const multipart = await t.request("POST", `${videoPath}/subtitles`, {
      body: raw,
      headers: { "content-type": "multipart/form-data; boundary=zzz" },
    });
    expect(multipart.status).toBe(201);
    // A part without a name is ignored like an unknown field, whatever it holds.
    const unnamed = await t.request("POST", `${videoPath}/subtitles`, {
      body: Buffer.concat([
        Buffer.from('--zzz\r\nContent-Disposition: form-data; name=""\r\n\r\n'),
        Buffer.from([0x00, 0xff, 0x00]),
        Buffer.from(
          '\r\n--zzz\r\nContent-Disposition: form-data; name="title"\r\n\r\nGerman\r\n--zzz\r\nContent-Disposition: form-data; name="language"\r\n\r\nde\r\n--zzz\r\nContent-Disposition: form-data; name="file"; filename="a.vtt"\r\n\r\nWEBVTT\n\n00:00.000 --> 00:01.000\nhi\n\r\n--zzz--\r\n',
        ),
      ]),
      headers: { "content-type": "multipart/form-data; boundary=zzz" },
    });
    expect(unnamed.status, unnamed.text).toBe(201);
    const cloud = await t.cloud("POST", "/v1/user-resource/token", {
      body: '{"name":"\\udfff"}',
      headers: { "content-type": "application/json" },
    });
    expect(cloud.status).toBe(400);
    expect(cloud.body.errors.name).toMatch(/surrogates/);
  });

  it("answers JSON declared in a charset other than UTF-8 with 415 in each group's shape", async () => {
    const media = await t.request("POST", "/v1/media/libraries", {
      body: '{"name":"x"}',
      headers: { "content-type": "application/json; charset=utf-16" },
    });
    expect(media.status).toBe(415);
    expect(media.body).toEqual({ success: false, message: "Unsupported Media Type" });
    const cloud = await t.cloud("POST", "/v1/user-resource/token", {
      body: '{"name":"x"}',
      headers: { "content-type": 'application/json; charset="ISO-8859-1"' },
    });
    expect(cloud.status).toBe(415);
    expect(cloud.body).toEqual({
      message: "Unsupported Media Type",
      errors: { Error: "Unsupported Media Type" },
    });
    const utf8 = await t.request("POST", "/v1/media/libraries", {
      body: '{"name":"x"}',
      headers: { "content-type": "application/json; charset=UTF-8" },
    });
    expect(utf8.status).toBe(201);
  });

  it("answers a compressed body (Content-Encoding) with 415 in each group's shape", async () => {
    const json = { "content-type": "application/json" };
    for (const encoding of ["gzip", "br", "deflate, gzip"]) {
      const media = await t.request("POST", "/v1/media/libraries", {
        body: '{"name":"compressed"}',
        headers: { ...json, "content-encoding": encoding },
      });
      expect(media.status, encoding).toBe(415);
      expect(media.body).toEqual({ success: false, message: "Unsupported Media Type" });
      // The one coding taken (RFC 9110, 15.5.16; QA of 5 December, session 43).
      expect(media.headers.get("accept-encoding"), encoding).toBe("identity");
    }
    const cloud = await t.cloud("POST", "/v1/user-resource/token", {
      body: '{"description":"x"}',
      headers: { ...json, "content-encoding": "gzip" },
    });
    expect(cloud.status).toBe(415);
    expect(cloud.body).toEqual({
      message: "Unsupported Media Type",
      errors: { Error: "Unsupported Media Type" },
    });
    const list = await t.request("GET", "/v1/media/libraries?limit=100");
    expect(list.body.data.some((library: { name: string }) => library.name === "compressed")).toBe(false);
    // `identity` is no encoding at all.
    const plain = await t.request("POST", "/v1/media/libraries", {
      body: '{"name":"plain"}',
      headers: { ...json, "content-encoding": "identity" },
    });
    expect(plain.status).toBe(201);
  });

  it("reads a request without a body as none, whatever Content-Type it names (QA of 5 December, session 43)", async () => {
    const library = (await t.request("POST", "/v1/media/libraries", { json: { name: "typed, empty" } })).body
      .data;
    for (const type of [
      "application/x-www-form-urlencoded",
      "text/plain",
      "multipart/form-data; boundary=x",
      // No body, so no charset to misread.
      "application/json; charset=latin1",
      "application/x-www-form-urlencoded; charset=latin1",
    ]) {
      const renamed = await t.request("PATCH", `/v1/media/libraries/${library.id}`, {
        body: "",
        headers: { "content-type": type },
      });
      expect(renamed.status, type).toBe(200);
      const keys = await t.cloud("DELETE", "/v1/storage/user/keys?access_key=NOSUCHKEY", {
        headers: { "content-type": type },
      });
      expect(keys.status, type).toBe(404);
    }
    const deleted = await t.request("DELETE", `/v1/media/libraries/${library.id}`, {
      headers: { "content-type": "application/x-www-form-urlencoded", "content-length": "0" },
    });
    expect(deleted.status).toBe(200);
    // With a body, the type still decides: no operation takes text.
    const text = await t.request("POST", "/v1/media/libraries", {
      body: "name",
      headers: { "content-type": "text/plain" },
    });
    expect(text.status).toBe(415);
  });

  it("refuses JSON that is not an object also where the operation takes no body (QA of 5 December, session 43)", async () => {
    const library = (await t.request("POST", "/v1/media/libraries", { json: { name: "kept" } })).body.data;
    for (const body of ["null", "[1]", "42", '"x"', "true"]) {
      const deletion = await t.request("DELETE", `/v1/media/libraries/${library.id}`, {
        body,
        headers: { "content-type": "application/json" },
      });
      expect([deletion.status, deletion.body], body).toEqual([
        400,
        { success: false, message: "Invalid Request" },
      ]);
      const keys = await t.cloud("POST", "/v1/storage/user/keys", {
        body,
        headers: { "content-type": "application/json" },
      });
      expect(keys.status, body).toBe(400);
    }
    expect((await t.request("GET", `/v1/media/libraries/${library.id}`)).status).toBe(200);
  });

  it("answers a truncated or malformed multipart body with 400 as soon as the body ends", async () => {
    const bodies = [
      '--zzz\r\nContent-Disposition: form-data; name="file"; filename="a.vtt"\r\n\r\nWEBVTT\r\n--zz',
      '--zzz\r\nContent-Disposition: form-data; name="title"\r\n\r\nt\r\n--zzz\r\nContent-Disposition: form-data; name="language"\r\n\r\nen\r\n--zzz\r\nContent-Disposition: form-data; name="file"; filename="a.vtt"\r\n\r\nWEBVTT\n\n00:00.000 --> 00:01.000\nhi\n\r\n--zzz',
      "not multipart at all",
      "",
    ];
    for (const body of bodies) {
      for (const path of [`${videoPath}/subtitles`, `${videoPath}/thumbnails`]) {
        const connection = await RawConnection.open(t.baseUrl);
        connection.write(multipartRequest(path, t.adminKey, body));
        const answer = await connection.answer();
        connection.close();
        expect(answer?.status, `${path} ${JSON.stringify(body)}`).toBe(400);
        const parsed = JSON.parse(answer?.body ?? "");
        expect(parsed).toMatchObject({ success: false, message: "Invalid Request" });
        expect(parsed.errors[0]).toMatchObject({ field: "file", code: "validation_format" });
      }
    }
    const source = await RawConnection.open(t.baseUrl);
    source.write(multipartRequest(`${videoPath}/source`, t.adminKey, bodies[0] ?? "").replace("POST", "PUT"));
    expect((await source.answer())?.status).toBe(400);
    source.close();
  });

  it("answers a multipart body with more parts than allowed with 413", async () => {
    const part = '--zzz\r\nContent-Disposition: form-data; name="x"\r\n\r\ny\r\n';
    const response = await t.request("POST", `${videoPath}/subtitles`, {
      body: `${part.repeat(5000)}--zzz--\r\n`,
      headers: { "content-type": "multipart/form-data; boundary=zzz" },
    });
    expect(response.status).toBe(413);
    expect(response.body).toEqual({ success: false, message: "Payload Too Large" });
  });

  it("keeps reading what a client still sends after answering its body unread (lingering close)", async () => {
    // Half-open, as a client that goes on sending after the server has said all it will say.
    const socket = connect({ port: Number(new URL(t.baseUrl).port), host: "127.0.0.1", allowHalfOpen: true });
    let received = "";
    let failure: string | undefined;
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("latin1");
    });
    socket.on("error", (error: NodeJS.ErrnoException) => {
      failure = error.code;
    });
    // Refused on its Content-Length (past the JSON limit) before any of the body is read.
    socket.write(
      `POST /v1/media/libraries HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer ${t.adminKey}\r\n` +
        `content-type: application/json\r\ncontent-length: 4000000\r\n\r\n${" ".repeat(1000)}`,
    );
    await once(socket, "end");
    expect(parseAnswer(received)?.status).toBe(413);
    // The client goes on sending the body it announced, as clients that write before they read do.
    // Before, the server had closed its socket: these bytes met a reset (EPIPE, ECONNRESET), which
    // makes such clients drop an answer they have not read yet.
    const chunk = Buffer.alloc(64 * 1024, " ");
    for (let sent = 1000; sent < 4_000_000 && failure === undefined; sent += chunk.length) {
      await new Promise((resolve) => socket.write(chunk, resolve));
    }
    socket.end();
    await once(socket, "close");
    expect(failure).toBeUndefined();
  });

  it("limits concurrent uploads per key with 429 and frees the slot when the upload ends", async () => {
    const stalled = await stalledUpload("POST", `${videoPath}/subtitles`);
    const refused = await probeUpload();
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({ success: false, error: "rate_limited", message: "Too many requests" });
    expect(refused.headers.get("retry-after")).toBe("1");
    // Another key has its own slots; JSON requests of the same key are not uploads.
    const other = await t.createOrganization();
    const otherLibrary = await t.request("POST", "/v1/media/libraries", {
      json: { name: "O" },
      key: other.key,
    });
    expect(otherLibrary.status).toBe(201);
    expect((await t.request("GET", "/v1/media/libraries")).status).toBe(200);
    stalled.close();
    expect((await slotFreed()).status).toBe(400);
  });

  it("counts a tus PATCH against the key's concurrent uploads", async () => {
    const [, , , , libraryId, , videoId] = videoPath.split("/");
    const created = await fetch(`${t.baseUrl}/v1/media/tus`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${t.adminKey}`,
        "tus-resumable": "1.0.0",
        "upload-length": "100000",
        "upload-metadata": `library_id ${btoa(libraryId ?? "")},video_id ${btoa(videoId ?? "")}`,
      },
    });
    expect(created.status).toBe(201);
    const uploadPath = new URL(created.headers.get("location") ?? "", `${t.baseUrl}/v1/media/tus/`).pathname;
    // A PATCH that sends a fifth of its bytes and stalls holds the key's only slot: without the
    // count the probe is never refused, and the test times out.
    const stalled = await stalledRequest(
      `PATCH ${uploadPath} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer ${t.adminKey}\r\n` +
        "tus-resumable: 1.0.0\r\nupload-offset: 0\r\ncontent-type: application/offset+octet-stream\r\n" +
        `content-length: 100000\r\n\r\n${"x".repeat(20000)}`,
    );
    stalled.close();
    expect((await slotFreed()).status).toBe(400);
  });

  it("answers edge requests naming no host name (NUL, spaces) with 404 without asking the store", async () => {
    for (const [host, path] of [
      ["a b", "/%00/x"],
      ["\u00ff", "/a%20b/x"],
      ["localhost", `/${"a".repeat(300)}/x`],
    ]) {
      const answer = await sendRaw(t.cumulo.edgeUrl ?? "", `GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
      expect(answer?.status).toBe(404);
      expect(JSON.parse(answer?.body ?? "")).toEqual({ success: false, message: "Resource not found" });
    }
    expect(errorLines(lines)).toEqual([]);
  });

  it("logs a client that aborts an upload as a warning, not an error", async () => {
    const before = lines.length;
    for (const [method, path] of [
      ["POST", `${videoPath}/subtitles`],
      ["PUT", `${videoPath}/source`],
    ] as const) {
      const connection = await stalledUpload(method, path);
      connection.close();
      await slotFreed();
    }
    // The slot is freed when the connection closes; the handler logs once its reading fails, later.
    const warned = () =>
      lines.slice(before).some((line) => line.msg === "client closed the connection during its upload");
    await waitUntil(warned, 10_000, "the warning");
    expect(errorLines(lines.slice(before))).toEqual([]);
  });

  it("takes time filters from year 0 to 9999 on both stores", async () => {
    for (const query of [
      "created_before=0000-01-01T00:00:00Z",
      "created_after=0000-01-01",
      "created_before=9999-12-31T23:59:59.999Z",
    ]) {
      const answer = await t.request("GET", `/v1/media/libraries?${query}`);
      expect(answer.status, query).toBe(200);
    }
    expect(errorLines(lines)).toEqual([]);
  });
});
