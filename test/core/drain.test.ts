import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { setTimeout } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { drainConnections, stopListening } from "../../src/http/listener.ts";

// The two steps of a graceful close on a plain `http` server, driven through raw sockets so each
// request is sent exactly when the test says.
let draining = false;
let server: Server;

async function listen(): Promise<number> {
  draining = false;
  server = createServer((_request, response) => {
    if (draining) response.shouldKeepAlive = false;
    response.end("ok");
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return (server.address() as { port: number }).port;
}

/** Sends one request on `socket` and resolves with the raw answer once it has all arrived. */
function request(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = "";
    const closed = () => reject(new Error("the connection closed before the answer"));
    if (!socket.writable) return closed();
    const onData = (chunk: Buffer) => {
      answer += chunk.toString("latin1");
      if (answer.endsWith("\r\n\r\nok")) {
        socket.off("data", onData).off("close", closed);
        resolve(answer);
      }
    };
    socket.on("data", onData).once("close", closed);
    socket.write("GET / HTTP/1.1\r\nHost: test\r\n\r\n");
  });
}

/** The whole close, as Fastify and the edge do it: drain, then `http`'s close (which ends idle connections). */
const closeAfterDrain = (graceMs: number) =>
  drainConnections(server, graceMs).then(() => new Promise<void>((resolve) => server.close(() => resolve())));

async function keepAliveSocket(port: number): Promise<Socket> {
  const socket = connect(port, "127.0.0.1");
  await once(socket, "connect");
  expect(await request(socket)).toMatch(/connection: keep-alive/i);
  return socket;
}

afterEach(async () => {
  server.closeAllConnections();
  stopListening(server);
});

describe("draining a listener", () => {
  it("refuses new connections at once and still answers a request sent later on an idle keep-alive connection", async () => {
    const port = await listen();
    const socket = await keepAliveSocket(port);
    stopListening(server);
    draining = true;
    const closed = closeAfterDrain(20_000);

    const refused = connect(port, "127.0.0.1");
    const [error] = (await once(refused, "error")) as [{ code?: string }];
    expect(error.code).toBe("ECONNREFUSED");

    // A client that paused a while before its next request still finds its connection open.
    await setTimeout(300);
    const answer = await request(socket);
    expect(answer).toMatch(/^HTTP\/1\.1 200/);
    expect(answer).toMatch(/connection: close/i);
    // The grace ends as the last connection goes, long before its 20 s (the test's timeout is 30 s).
    await once(socket, "close");
    await closed;
  });

  it("ends after the grace while a connection stays idle, which the server's close then ends", async () => {
    const port = await listen();
    const socket = await keepAliveSocket(port);
    stopListening(server);
    const ended = once(socket, "end");
    await closeAfterDrain(100);
    await ended;
  });

  it("returns at once when no connection is open", async () => {
    await listen();
    stopListening(server);
    stopListening(server); // a second call changes nothing
    await drainConnections(server, 20_000);
    expect(server.listening).toBe(false);
  });
});
