import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { createLibrary, createVideo, MISSING_ID } from "../media/helpers.ts";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";
import { capturingLogger, errorLines } from "./log-capture.ts";
import { RawConnection, sendRaw } from "./raw-http.ts";

const IDLE_CONNECTIONS = 300;

/** /healthz through a fresh connection: it must answer while the listener is busy with slow clients. */
async function healthy(baseUrl: string): Promise<number> {
  const response = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(3_000) });
  await response.arrayBuffer();
  return response.status;
}

describe("slow and broken clients on both listeners", () => {
  let t: TestApp;
  let edgeUrl: string;
  const { logger, lines } = capturingLogger();

  beforeAll(async () => {
    t = await startTestApp(
      {
        CUMULO_EDGE_PORT: "0",
        // Small bounds so the test runs fast; the defaults are documented in docs/decisions.md.
        CUMULO_HEADERS_TIMEOUT_MS: "400",
        CUMULO_REQUEST_TIMEOUT_MS: "1200",
        CUMULO_KEEP_ALIVE_TIMEOUT_MS: "300",
        CUMULO_MAX_HEADER_BYTES: "4096",
        CUMULO_MAX_CONCURRENT_UPLOADS: "1000",
      },
      { logger },
    );
    edgeUrl = t.cumulo.edgeUrl ?? "";
  });
  afterAll(() => t.close());

  it("stays responsive with hundreds of idle and stalled connections on each listener, and closes them", async () => {
    const idle: RawConnection[] = [];
    for (let index = 0; index < IDLE_CONNECTIONS; index++) {
      for (const url of [t.baseUrl, edgeUrl]) {
        const connection = await RawConnection.open(url);
        // Half send nothing at all, half stall in the middle of their headers.
        if (index % 2 === 1)
          connection.write("GET /v1/media/libraries HTTP/1.1\r\nHost: localhost\r\nX-Wait");
        idle.push(connection);
      }
    }
    expect(await healthy(t.baseUrl)).toBe(200);
    const edgeAnswer = await fetch(`${edgeUrl}/nothing-here`, { signal: AbortSignal.timeout(3_000) });
    expect(edgeAnswer.status).toBe(404);
    // Each connection that never completed a request is closed once the headers timeout passes.
    await Promise.all(idle.map((connection) => connection.closed));
    expect(await healthy(t.baseUrl)).toBe(200);
  });

  it("answers stalled headers with 408 in the group's shape and closes the connection", async () => {
    for (const [url, path, body] of [
      [t.baseUrl, "/v1/media/libraries", { success: false, message: "Request Timeout" }],
      [edgeUrl, "/lib/video.mp4", { success: false, message: "Request Timeout" }],
    ] as const) {
      const connection = await RawConnection.open(url);
      connection.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nX-Slow: `);
      const answer = await connection.answer(5_000);
      await connection.closed;
      expect(answer?.status).toBe(408);
      expect(JSON.parse(answer?.body ?? "")).toEqual(body);
    }
  });

  it("cuts off a trickled body once the request timeout passes, and frees the connection", async () => {
    const connection = await RawConnection.open(t.baseUrl);
    connection.write(
      `POST /v1/media/libraries HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${t.adminKey}\r\n` +
        "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
    );
    // One byte whenever the server has not yet given up: never enough to finish the body.
    const trickle = setInterval(() => connection.write(" "), 50);
    try {
      const answer = await connection.answer(10_000);
      await connection.closed;
      expect(answer?.status).toBe(408);
      expect(JSON.parse(answer?.body ?? "")).toEqual({ success: false, message: "Request Timeout" });
    } finally {
      clearInterval(trickle);
    }
    expect(await healthy(t.baseUrl)).toBe(200);

    // A cloud request's body that times out is answered in the cloud shape.
    const cloud = await RawConnection.open(t.baseUrl);
    cloud.write(
      `POST /v1/user-resource/token HTTP/1.1\r\nHost: localhost\r\napikey: ${t.adminKey}\r\n` +
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    );
    const answer = await cloud.answer(10_000);
    await cloud.closed;
    expect(answer?.status).toBe(408);
    expect(JSON.parse(answer?.body ?? "")).toEqual({
      message: "Request Timeout",
      errors: { Error: "Request Timeout" },
    });
  });

  it("answers what the HTTP parser refuses in the group's shape, on the API and the edge", async () => {
    const big = "x".repeat(8192);
    const cases: { url: string; request: string; status: number; body: unknown }[] = [
      {
        url: t.baseUrl,
        request: `GET /v1/media/libraries HTTP/1.1\r\nHost: x\r\nX-Big: ${big}\r\n\r\n`,
        status: 431,
        body: { success: false, message: "Request Header Fields Too Large" },
      },
      {
        url: t.baseUrl,
        request: `GET /v1/user-resource/token HTTP/1.1\r\nHost: x\r\nX-Big: ${big}\r\n\r\n`,
        status: 431,
        body: {
          message: "Request Header Fields Too Large",
          errors: { Error: "Request Header Fields Too Large" },
        },
      },
      {
        url: t.baseUrl,
        request:
          "POST /v1/media/libraries HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        status: 400,
        body: { success: false, message: "Invalid Request" },
      },
      {
        url: t.baseUrl,
        request:
          "POST /v1/user-resource/token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n",
        status: 400,
        body: { message: "Invalid Request", errors: { Error: "Invalid Request" } },
      },
      {
        url: t.baseUrl,
        request: "GARBAGE\r\n\r\n",
        status: 400,
        body: { success: false, message: "Invalid Request" },
      },
      // HTTP/1.1 without Host: Node's own 400 had an empty body.
      {
        url: t.baseUrl,
        request: "GET /v1/media/libraries HTTP/1.1\r\n\r\n",
        status: 400,
        body: { success: false, message: "Invalid Request" },
      },
      {
        url: t.baseUrl,
        request: "GET /v1/network/ip_addresses HTTP/1.1\r\n\r\n",
        status: 400,
        body: { message: "Invalid Request", errors: { Error: "Invalid Request" } },
      },
      {
        url: edgeUrl,
        request: "GET /a HTTP/1.1\r\n\r\n",
        status: 400,
        body: { success: false, message: "Invalid Request" },
      },
      // An expectation other than 100-continue: Node's own 417 had an empty body.
      {
        url: t.baseUrl,
        request: "GET /v1/media/libraries HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n",
        status: 417,
        body: { success: false, message: "Expectation Failed" },
      },
      {
        url: t.baseUrl,
        request: "GET /v1/user-resource/token HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n",
        status: 417,
        body: { message: "Expectation Failed", errors: { Error: "Expectation Failed" } },
      },
      {
        url: edgeUrl,
        request: "GET /a HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n",
        status: 417,
        body: { success: false, message: "Expectation Failed" },
      },
      {
        url: edgeUrl,
        request: `GET /a HTTP/1.1\r\nHost: x\r\nX-Big: ${big}\r\n\r\n`,
        status: 431,
        body: { success: false, message: "Request Header Fields Too Large" },
      },
      {
        url: edgeUrl,
        request: "GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        status: 400,
        body: { success: false, message: "Invalid Request" },
      },
      // Two Host lines (RFC 9112, 3.2): the edge picked the distribution by the first (QA of 4
      // December, session 41), where a cache in front may go by the last.
      {
        url: edgeUrl,
        request: "GET /a HTTP/1.1\r\nHost: a.example.com\r\nHost: b.example.com\r\n\r\n",
        status: 400,
        body: { success: false, message: "Invalid Request" },
      },
      {
        url: t.baseUrl,
        request: "GET /v1/media/libraries HTTP/1.1\r\nHost: x\r\nhost: y\r\n\r\n",
        status: 400,
        body: { success: false, message: "Invalid Request" },
      },
      // Many short lines: Node counted their names and values only (a section four times the
      // limit passed) and dropped every line after its 2000th unseen, a proxy's own headers too.
      {
        url: edgeUrl,
        request: `GET /a HTTP/1.1\r\nHost: x\r\n${"a:\r\n".repeat(1100)}\r\n`,
        status: 431,
        body: { success: false, message: "Request Header Fields Too Large" },
      },
      {
        url: t.baseUrl,
        request: `GET /v1/user-resource/token HTTP/1.1\r\nHost: x\r\n${"a:\r\n".repeat(1100)}\r\n`,
        status: 431,
        body: {
          message: "Request Header Fields Too Large",
          errors: { Error: "Request Header Fields Too Large" },
        },
      },
      // A tunnel: the connection was closed without an answer.
      {
        url: t.baseUrl,
        request: "CONNECT 127.0.0.1:6379 HTTP/1.1\r\nHost: 127.0.0.1:6379\r\n\r\n",
        status: 405,
        body: { success: false, message: "Method Not Allowed" },
      },
      {
        url: edgeUrl,
        request: "CONNECT 127.0.0.1:6379 HTTP/1.1\r\nHost: 127.0.0.1:6379\r\n\r\n",
        status: 405,
        body: { success: false, message: "Method Not Allowed" },
      },
    ];
    for (const { url, request, status, body } of cases) {
      const answer = await sendRaw(url, request);
      expect(answer?.status, request.slice(0, 60)).toBe(status);
      expect(JSON.parse(answer?.body ?? ""), request.slice(0, 60)).toEqual(body);
      expect(answer?.headers["x-request-id"], request.slice(0, 60)).toMatch(/^[0-9a-f-]{36}$/);
      // An origin server with a clock dates every answer (RFC 9110, 6.6.1).
      expect(Date.parse(answer?.headers.date ?? ""), request.slice(0, 60)).not.toBeNaN();
    }
    const echoed = await sendRaw(
      t.baseUrl,
      "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: trace-417\r\nExpect: 200-ok\r\n\r\n",
    );
    expect(echoed?.headers["x-request-id"]).toBe("trace-417");
    expect(await healthy(t.baseUrl)).toBe(200);
  });

  it("reads every header line of a section within the limit", async () => {
    // 900 lines and then the key: a section of about 3.6 KiB, under the 4 KiB limit.
    const answer = await sendRaw(
      t.baseUrl,
      `GET /v1/media/libraries HTTP/1.1\r\nHost: x\r\n${"a:\r\n".repeat(900)}Authorization: Bearer ${t.adminKey}\r\nConnection: close\r\n\r\n`,
    );
    expect(answer?.status).toBe(200);
  });

  it("answers a URL too long 414 and a header too long 431, on the API and the edge", async () => {
    // Both over the 4 KiB header section: Node's parser refuses either with HPE_HEADER_OVERFLOW, and
    // a URL too long was answered 431 as if a header were.
    const long = "x".repeat(20 * 1024);
    const cases: { url: string; request: string; status: number; body: unknown }[] = [
      {
        url: t.baseUrl,
        request: `GET /v1/media/libraries?q=${long} HTTP/1.1\r\nHost: x\r\n\r\n`,
        status: 414,
        body: { success: false, message: "URI Too Long" },
      },
      {
        url: t.baseUrl,
        request: `GET /v1/user-resource/token?q=${long} HTTP/1.1\r\nHost: x\r\n\r\n`,
        status: 414,
        body: { message: "URI Too Long", errors: { Error: "URI Too Long" } },
      },
      {
        url: t.baseUrl,
        request: `GET /v1/media/libraries HTTP/1.1\r\nHost: x\r\nX-Long: ${long}\r\n\r\n`,
        status: 431,
        body: { success: false, message: "Request Header Fields Too Large" },
      },
      {
        url: edgeUrl,
        request: `GET /lib/${long}.mp4 HTTP/1.1\r\nHost: x\r\n\r\n`,
        status: 414,
        body: { success: false, message: "URI Too Long" },
      },
      {
        url: edgeUrl,
        request: `GET /lib/video.mp4 HTTP/1.1\r\nHost: x\r\nX-Long: ${long}\r\n\r\n`,
        status: 431,
        body: { success: false, message: "Request Header Fields Too Large" },
      },
    ];
    for (const { url, request, status, body } of cases) {
      const answer = await sendRaw(url, request);
      expect(answer?.status, request.slice(0, 40)).toBe(status);
      expect(JSON.parse(answer?.body ?? ""), request.slice(0, 40)).toEqual(body);
      expect(answer?.headers.connection, request.slice(0, 40)).toBe("close");
    }
    expect(await healthy(t.baseUrl)).toBe(200);
  });

  it("refuses a headers timeout longer than the request timeout at start-up", () => {
    expect(() =>
      loadConfig({ CUMULO_HEADERS_TIMEOUT_MS: "20000", CUMULO_REQUEST_TIMEOUT_MS: "10000" }),
    ).toThrow(/CUMULO_HEADERS_TIMEOUT_MS must not be longer than CUMULO_REQUEST_TIMEOUT_MS/);
  });

  it("treats a client that hangs up during a raw video upload as gone, not as a server error", async () => {
    const library = await createLibrary(t);
    const video = await createVideo(t, library.id);
    for (const contentType of ["video/mp4", "application/octet-stream"]) {
      const connection = await RawConnection.open(t.baseUrl);
      connection.write(
        `PUT /v1/media/libraries/${library.id}/videos/${video.id}/source HTTP/1.1\r\nHost: localhost\r\n` +
          `Authorization: Bearer ${t.adminKey}\r\nContent-Type: ${contentType}\r\nContent-Length: 100000\r\n\r\n`,
      );
      connection.write(Buffer.alloc(5000, 1));
      await new Promise((resolve) => setTimeout(resolve, 100));
      connection.close();
      await connection.closed;
    }
    // What the server did with each request is logged once it has finished with it.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const after = await t.request("GET", `/v1/media/libraries/${library.id}/videos/${video.id}`);
    expect(after.body.data.status).toBe(video.status);
    expect(errorLines(lines)).toEqual([]);
  });

  it("survives bursts of raw uploads whose clients hang up within milliseconds", async () => {
    const library = await createLibrary(t);
    const video = await createVideo(t, library.id);
    const hangUp = async (afterMs: number) => {
      const connection = await RawConnection.open(t.baseUrl);
      connection.write(
        `PUT /v1/media/libraries/${library.id}/videos/${video.id}/source HTTP/1.1\r\nHost: localhost\r\n` +
          `Authorization: Bearer ${t.adminKey}\r\nContent-Type: video/mp4\r\nContent-Length: 1000000\r\n\r\n`,
      );
      connection.write(Buffer.alloc(16_384, 1));
      await new Promise((resolve) => setTimeout(resolve, afterMs));
      connection.close();
    };
    // A hang-up while the blob store made its folder, before it read the body, was an error event
    // nobody listened to: it ended the process.
    for (let burst = 0; burst < 15; burst++) {
      await Promise.all(Array.from({ length: 20 }, (_, index) => hangUp(index % 6)));
    }
    // Still here once it has dealt with them all (a loaded machine takes its time).
    await waitUntil(async () => (await healthy(t.baseUrl).catch(() => 0)) === 200, 20_000, "the API answers");
    expect(errorLines(lines)).toEqual([]);
  });

  it("sends 100 Continue only once a handler reads the body, so a refused upload is never sent", async () => {
    const library = await createLibrary(t);
    const video = await createVideo(t, library.id);
    const source = `/v1/media/libraries/${library.id}/videos/${video.id}/source`;
    const head = (path: string, key: string, length: number, type = "video/mp4") =>
      `PUT ${path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: ${type}\r\nContent-Length: ${length}\r\nExpect: 100-continue\r\n\r\n`;
    const refused = [
      { request: head(source, "wrong-key-0123456789abcdef", 1000), status: 401 },
      { request: head(source.replace(video.id, MISSING_ID), t.adminKey, 1000), status: 404 },
      { request: head(source, t.adminKey, 3 * 1024 ** 3), status: 413 },
    ];
    for (const { request, status } of refused) {
      // Node answered `100 Continue` as soon as the headers arrived, before any check.
      const answer = await sendRaw(t.baseUrl, request);
      expect(answer?.status, request.slice(0, 80)).toBe(status);
      expect(answer?.headers.connection).toBe("close");
    }

    const connection = await RawConnection.open(t.baseUrl);
    const body = Buffer.alloc(1000, 7);
    connection.write(head(source, t.adminKey, body.length, "application/octet-stream"));
    const interim = await connection.answer();
    expect(interim?.status).toBe(100);
    connection.write(body);
    await new Promise<void>((resolve) => {
      const poll = () =>
        /\r\n\r\nHTTP\/1\.1 2\d\d /.test(connection.received) ? resolve() : setTimeout(poll, 20);
      poll();
    });
    connection.close();
    expect(connection.received).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 202 /);
  });

  it("survives a malformed request sent on the connection right after a raw upload's body", async () => {
    const library = await createLibrary(t);
    const video = await createVideo(t, library.id);
    const body = Buffer.alloc(100_000, 1);
    const connection = await RawConnection.open(t.baseUrl);
    // The parser refuses the second request and closes the connection while the upload is stored:
    // the upload's request then reports an "aborted" error, which ended the process.
    connection.write(
      Buffer.concat([
        Buffer.from(
          `PUT /v1/media/libraries/${library.id}/videos/${video.id}/source HTTP/1.1\r\nHost: localhost\r\n` +
            `Authorization: Bearer ${t.adminKey}\r\nContent-Type: video/mp4\r\nContent-Length: ${body.length}\r\n\r\n`,
        ),
        body,
        Buffer.from("GARBAGE\r\n\r\n"),
      ]),
    );
    await connection.closed;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await healthy(t.baseUrl)).toBe(200);
    const after = await t.request("GET", `/v1/media/libraries/${library.id}/videos/${video.id}`);
    expect(after.status).toBe(200);
    expect(errorLines(lines)).toEqual([]);
  });

  it("logs no slow or broken client at error level", () => {
    expect(errorLines(lines)).toEqual([]);
  });
});
