import { connect, type Socket } from "node:net";

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parses the first HTTP/1.1 answer in `text` (Content-Length or chunked body, or up to the close). */
export function parseAnswer(text: string): RawAnswer | undefined {
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return undefined;
  const [statusLine = "", ...lines] = text.slice(0, end).split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? Number.NaN);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = text.slice(end + 4);
  if (headers["transfer-encoding"] === "chunked") {
    let decoded = "";
    for (;;) {
      const lineEnd = body.indexOf("\r\n");
      const size = Number.parseInt(body.slice(0, lineEnd), 16);
      if (lineEnd < 0 || Number.isNaN(size) || size === 0) break;
      decoded += body.slice(lineEnd + 2, lineEnd + 2 + size);
      body = body.slice(lineEnd + 2 + size + 2);
    }
    body = decoded;
  } else if (headers["content-length"] !== undefined) {
    body = body.slice(0, Number(headers["content-length"]));
  }
  return { status, headers, body };
}

/** A raw TCP connection to an HTTP listener, for requests no HTTP client would send. */
export class RawConnection {
  readonly socket: Socket;
  #received = "";
  readonly closed: Promise<void>;
  readonly #waiters = new Set<() => void>();

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      this.#received += chunk;
      for (const waiter of this.#waiters) waiter();
    });
    socket.on("error", () => undefined);
    this.closed = new Promise((resolve) =>
      socket.on("close", () => {
        resolve();
        for (const waiter of this.#waiters) waiter();
      }),
    );
  }

  static open(baseUrl: string): Promise<RawConnection> {
    const { hostname, port } = new URL(baseUrl);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => resolve(new RawConnection(socket)));
      socket.once("error", reject);
    });
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  get received(): string {
    return this.#received;
  }

  /**
   * Waits until a whole answer has arrived or the server has closed the connection; rejects after
   * `timeoutMs` (a server that neither answers nor closes is hanging).
   */
  answer(timeoutMs = 5_000): Promise<RawAnswer | undefined> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const parsed = parseAnswer(this.#received);
        const complete =
          parsed &&
          (parsed.headers["content-length"] === undefined ||
            Buffer.byteLength(parsed.body, "latin1") >= Number(parsed.headers["content-length"]));
        if (complete || this.socket.destroyed || this.socket.readableEnded) {
          clearTimeout(timer);
          this.#waiters.delete(check);
          resolve(parsed);
        }
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(`no answer within ${timeoutMs} ms; received ${JSON.stringify(this.#received)}`));
      }, timeoutMs);
      this.#waiters.add(check);
      check();
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

/** Sends `request` on a fresh connection and waits for the answer (or the close). */
export async function sendRaw(baseUrl: string, request: string | Buffer, timeoutMs = 5_000) {
  const connection = await RawConnection.open(baseUrl);
  try {
    connection.write(request);
    return await connection.answer(timeoutMs);
  } finally {
    connection.close();
  }
}
