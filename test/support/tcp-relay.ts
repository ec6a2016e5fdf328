import { createConnection, createServer, type Server, type Socket } from "node:net";

/** A TCP relay in front of a server that a test can cut (every connection dropped, new ones refused) and restore. */
export interface TcpRelay {
  /** The relay's port on 127.0.0.1: connect here instead of to the target. */
  port: number;
  /** Drops every relayed connection and stops listening: the target looks down. */
  cut(): Promise<void>;
  /** Listens again on the same port. */
  restore(): Promise<void>;
  /**
   * Holds every byte in either direction, accepting new connections: the target looks frozen (a
   * stopped server, a network that drops packets), connections open but never answered.
   */
  freeze(): void;
  /** Passes on what was held, and everything after. */
  thaw(): void;
  close(): Promise<void>;
}

export async function startTcpRelay(targetHost: string, targetPort: number): Promise<TcpRelay> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  };
  let frozen = false;
  /** What arrived while frozen, with the socket it is for, in order: bytes, or the end of the stream. */
  const held: [Socket, Buffer | "end"][] = [];
  const pass = (to: Socket, what: Buffer | "end") => {
    if (frozen) held.push([to, what]);
    else if (what === "end") to.end();
    else to.write(what);
  };
  const forward = (from: Socket, to: Socket) => {
    from.on("data", (chunk: Buffer) => pass(to, chunk));
    from.on("end", () => pass(to, "end"));
  };
  let server: Server;
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server = createServer((client) => {
        const upstream = createConnection({ host: targetHost, port: targetPort });
        track(client);
        track(upstream);
        client.on("error", () => upstream.destroy());
        upstream.on("error", () => client.destroy());
        forward(client, upstream);
        forward(upstream, client);
      });
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => resolve((server.address() as { port: number }).port));
    });
  const port = await listen(0);
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    });
  return {
    port,
    cut: stop,
    restore: async () => {
      await listen(port);
    },
    freeze: () => {
      frozen = true;
    },
    thaw: () => {
      frozen = false;
      for (const [to, what] of held.splice(0)) if (!to.destroyed) pass(to, what);
    },
    close: () => (server.listening ? stop() : Promise.resolve()),
  };
}
