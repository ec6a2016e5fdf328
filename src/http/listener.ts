import { randomUUID } from "node:crypto";
import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from "node:http";
import { Server as NetServer, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { setImmediate, setTimeout } from "node:timers/promises";
import type { FastifyBaseLogger } from "fastify";
import type { Config } from "../config.ts";
import { requestId } from "./request-id.ts";

/**
 * Time and size bounds of an HTTP listener (the API and the CDN edge alike): a client that stalls
 * or trickles its headers or body is cut off, an idle keep-alive connection is closed, and an
 * oversized header section is refused before it is buffered.
 */
export function listenerLimits(config: Config): ServerOptions {
  const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, maxHeaderBytes } = config.listener;
  return {
    headersTimeout: headersTimeoutMs,
    requestTimeout: requestTimeoutMs,
    keepAliveTimeout: keepAliveTimeoutMs,
    maxHeaderSize: maxHeaderBytes,
    // Node checks the two timeouts on this interval (30 s by default, which would let a stalled
    // client outlive its headers timeout several times over).
    connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(headersTimeoutMs / 4))),
    // `checkedRequests` answers an HTTP/1.1 request without Host, where Node sends an empty 400.
    requireHostHeader: false,
  };
}

/** What the HTTP parser's error tells: its code, the read it stopped in and how far into that read. */
type ParserError = { code?: string; rawPacket?: unknown; bytesParsed?: number };

/** Why the HTTP parser refused a connection's input, as a status and the contract's message. */
export function clientErrorStatus(error: ParserError): { status: number; message: string } {
  switch (error.code) {
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { status: 408, message: "Request Timeout" };
    case "HPE_HEADER_OVERFLOW":
      return overflowedInRequestLine(error)
        ? { status: 414, message: "URI Too Long" }
        : { status: 431, message: "Request Header Fields Too Large" };
    default:
      return { status: 400, message: "Invalid Request" };
  }
}

/** The start of a request line; a header line has no space before its colon. */
const REQUEST_LINE_START = /^[A-Z]+ /;

/**
 * Whether the header section went over its size within the request line: the URL is too long (414,
 * as nginx answers), not the headers (431). The line the parser stopped in is a request line begun
 * in the read it stopped in. Only that read is known: a URL that arrived over several reads and
 * went over the size in a later one cannot be told from a long header, and stays 431.
 */
function overflowedInRequestLine(error: ParserError): boolean {
  const raw = error.rawPacket;
  if (!Buffer.isBuffer(raw)) return false;
  const parsed = raw.subarray(0, error.bytesParsed ?? raw.length);
  const lineStart = parsed.lastIndexOf(0x0a) + 1;
  return REQUEST_LINE_START.test(parsed.subarray(lineStart, lineStart + 32).toString("latin1"));
}

/** A request line, or the start of one too long to end within the bytes read (its group shows). */
const REQUEST_LINE = /^[A-Z]+ (\S+)/;

/** The path of the request that failed, when the parser kept the bytes holding its request line. */
function pathOf(error: ParserError): string | undefined {
  const raw = error.rawPacket;
  if (!Buffer.isBuffer(raw)) return undefined;
  return REQUEST_LINE.exec(raw.subarray(0, 8192).toString("latin1"))?.[1];
}

export type ClientErrorBody = (status: number, message: string, path: string | undefined) => object;

/**
 * Answers what the HTTP parser refuses before any handler runs (a malformed request, both
 * Content-Length and Transfer-Encoding, broken chunking, a header section too large, a headers or
 * request timeout) with `body`'s JSON, then closes the connection. These are the client's doing:
 * logged at debug, never as errors.
 */
export function clientErrorHandler(body: ClientErrorBody, logger: FastifyBaseLogger) {
  return (error: Error & ParserError, socket: Socket): void => {
    if (error.code === "ECONNRESET" || socket.destroyed) return;
    const { status, message } = clientErrorStatus(error);
    // The code and reason only: the error also holds the refused bytes, credentials included.
    logger.debug({ code: error.code, reason: error.message }, "client error");
    // The response of a request whose headers were read (a body that timed out) names its path.
    const pending = (socket as Socket & { _httpMessage?: { headersSent?: boolean; req?: IncomingMessage } })
      ._httpMessage;
    if (socket.writable && !pending?.headersSent) {
      // The request's own id when its headers were read, else a new one: every answer carries one.
      const id = pending?.req ? requestId(pending.req as IncomingMessage) : randomUUID();
      writeRawAnswer(socket, status, message, body(status, message, pathOf(error) ?? pending?.req?.url), id);
    }
    socket.destroy();
  };
}

/** An answer written on the socket itself, where no response object exists; the connection closes after it. */
function writeRawAnswer(
  socket: Duplex,
  status: number,
  message: string,
  body: object,
  id: string,
  headers = "",
): void {
  const text = JSON.stringify(body);
  socket.write(
    `HTTP/1.1 ${status} ${message}\r\nDate: ${new Date().toUTCString()}\r\n` +
      `Content-Type: application/json; charset=utf-8\r\n${headers}` +
      `Content-Length: ${Buffer.byteLength(text)}\r\nCache-Control: no-store\r\nX-Request-Id: ${id}\r\n` +
      `Connection: close\r\n\r\n${text}`,
  );
}

/**
 * Answers `CONNECT` (a tunnel, which neither listener opens) with 405 in `body`'s JSON: Node hands it
 * to a `connect` listener and, with none, closes the connection without an answer.
 */
function refuseTunnel(body: ClientErrorBody) {
  return (request: IncomingMessage, socket: Duplex): void => {
    const status = 405;
    const message = "Method Not Allowed";
    writeRawAnswer(
      socket,
      status,
      message,
      body(status, message, request.url),
      requestId(request),
      "Allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\n",
    );
    socket.end(() => socket.destroy());
  };
}

/**
 * Answers a request whose `Expect` asks for anything but `100-continue` (`continueWhenRead`)
 * with 417 in `body`'s JSON, where Node would send its own 417 with no body.
 */
export function expectationFailedHandler(body: ClientErrorBody) {
  return (request: IncomingMessage, response: ServerResponse): void =>
    refuse(request, response, body, 417, "Expectation Failed");
}

/** Answers before any handler runs: `body`'s JSON for the status, and the connection closed. */
function refuse(
  request: IncomingMessage,
  response: ServerResponse,
  body: ClientErrorBody,
  status: number,
  message: string,
): void {
  const text = JSON.stringify(body(status, message, request.url));
  response.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
    "x-request-id": requestId(request),
    connection: "close",
  });
  response.end(text);
}

/**
 * Sends `100 Continue` to a client that asked for it (`Expect: 100-continue`) only once a handler
 * starts reading the body, not as soon as the headers arrive as Node does: a request refused before
 * that (401, 404, 413, 429...) is answered at once and its client does not send a body nobody reads.
 */
export function continueWhenRead(server: Server): void {
  server.on("checkContinue", (request: IncomingMessage, response: ServerResponse) => {
    request.once("resume", () => {
      if (!response.headersSent) response.writeContinue();
    });
    server.emit("request", request, response);
  });
}

/** How long a connection closed after an early answer goes on reading what its client still sends. */
const LINGER_MS = 2_000;

/**
 * Closes the connection of an answer sent before its request's body was read (a 413, 415, 404 or 429
 * to a client still sending) without losing that answer. Node closes the socket once the answer is
 * written, and bytes the client still sends then meet a reset, which makes most clients drop the
 * answer they had not read yet ("fetch failed", EPIPE). As nginx's lingering close: the answer and
 * the end of the server's side go out at once, and what the client still sends is read and thrown
 * away (the request being dumped) until it closes its side, for `LINGER_MS` at most.
 */
export function lingerAfterEarlyAnswer(socket: Socket): void {
  // Node's server calls `destroySoon` once a `Connection: close` answer is written.
  socket.destroySoon = () => {
    socket.end();
    const cutOff = globalThis.setTimeout(() => socket.destroy(), LINGER_MS);
    socket.once("end", () => socket.destroy());
    socket.once("close", () => clearTimeout(cutOff));
  };
}

/**
 * Refuses, in `body`'s JSON as the parser's other refusals, what the parser lets through: an HTTP/1.1
 * request without a Host header or with two (RFC 9112, 3.2: a server must answer 400; the edge picks
 * the distribution by the first, a cache in front might by the last), and a header section over
 * `maxHeaderBytes` as sent (431). Node counts only the request target, names and values against its
 * own limit, so a section of many short lines could be four times the size. Every other request goes
 * to `handler`.
 */
export function checkedRequests(
  handler: RequestListener,
  body: ClientErrorBody,
  maxHeaderBytes: number,
): RequestListener {
  return (request, response) => {
    const raw = request.rawHeaders;
    // The request line ("METHOD target HTTP/1.1" and its line end) and the empty line that ends the section.
    let bytes = (request.method?.length ?? 0) + (request.url?.length ?? 0) + 12 + 2;
    let hosts = 0;
    for (let index = 0; index < raw.length; index += 2) {
      const name = raw[index] as string;
      // The colon and line end; the spaces around a value are not kept, so not counted.
      bytes += name.length + (raw[index + 1] as string).length + 3;
      if (name.length === 4 && name.toLowerCase() === "host") hosts++;
    }
    if (bytes > maxHeaderBytes) refuse(request, response, body, 431, "Request Header Fields Too Large");
    else if (hosts > 1 || (hosts === 0 && request.httpVersion === "1.1"))
      refuse(request, response, body, 400, "Invalid Request");
    else handler(request, response);
  };
}

/**
 * A node HTTP server with `listenerLimits` and `checkedRequests`, which reads every header line of
 * a request (Node's default keeps the first 2000 and drops the rest unseen: a viewer's padding could
 * push a proxy's country or forwarding header out of view) and answers `CONNECT`.
 */
export function createHttpServer(config: Config, handler: RequestListener, body: ClientErrorBody): Server {
  const server = createServer(
    listenerLimits(config),
    checkedRequests(handler, body, config.listener.maxHeaderBytes),
  );
  // No count: the section's size bounds the lines (`checkedRequests`).
  server.maxHeadersCount = 0;
  server.on("connect", refuseTunnel(body));
  return server;
}

/** The plain error shape of a listener outside the API (the CDN edge). */
const plainErrorBody: ClientErrorBody = (_status, message) => ({ success: false, message });

/** A node HTTP listener with `listenerLimits` and JSON answers to what its parser refuses. */
export function createBoundedServer(
  deps: { config: Config; logger: FastifyBaseLogger },
  handler: RequestListener,
  errorBody: ClientErrorBody = plainErrorBody,
): Server {
  const server = createHttpServer(deps.config, handler, errorBody);
  server.on("clientError", clientErrorHandler(errorBody, deps.logger));
  server.on("checkExpectation", expectationFailedHandler(errorBody));
  return server;
}

/** How often a closing listener looks whether its last connection has gone. */
const DRAIN_POLL_MS = 20;

const openConnections = (server: Server) =>
  new Promise<number>((resolve, reject) =>
    server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
  );

/**
 * First step of a graceful close: new connections are refused from now on; open ones stay. Call it
 * before answers start telling clients to reconnect: a connection made while the listening socket
 * is still open but not yet accepted would be reset when it closes, not refused.
 */
export function stopListening(server: Server): void {
  if (server.listening) NetServer.prototype.close.call(server);
}

/**
 * Second step: gives open connections up to `graceMs` (CUMULO_SHUTDOWN_GRACE_MS) in which a request
 * a client was already sending, or sends after a pause on an idle keep-alive connection, arrives and
 * is answered (the caller answers it with `Connection: close`, so the client leaves). It ends early
 * once no connection is open. `http`'s close() ends idle connections at once, which resets such
 * requests.
 */
export async function drainConnections(server: Server, graceMs: number): Promise<void> {
  let open = await openConnections(server);
  const deadline = Date.now() + graceMs;
  while (open > 0 && Date.now() < deadline) {
    await setTimeout(Math.min(DRAIN_POLL_MS, deadline - Date.now()));
    open = await openConnections(server);
  }
  // An event-loop turn runs timers before reading sockets: on a busy node the grace can end with
  // requests that arrived in time still unread, and their connections would be closed as idle.
  // One pass of I/O first reads and starts them, so their connections are no longer idle.
  if (open > 0) await setImmediate();
}
