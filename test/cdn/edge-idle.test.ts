import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../support/app.ts";
import { waitUntil } from "../support/wait.ts";
import { createDistribution, EDGE_ENV, edgeUrlOf, type Origin, startOrigin, uniqueHost } from "./support.ts";

const BIG = Buffer.alloc(32 * 1024 * 1024, 7);

describe("CDN edge: a viewer that stops reading", () => {
  let t: TestApp;
  let origin: Origin;
  let originClosed = false;
  beforeAll(async () => {
    t = await startTestApp({
      ...EDGE_ENV,
      CUMULO_EDGE_IDLE_TIMEOUT_MS: "500",
      CUMULO_EDGE_MAX_OBJECT_BYTES: String(64 * 1024),
    });
    origin = await startOrigin();
    origin.route("/big.bin", (_req, res) => {
      res.once("close", () => {
        originClosed = true;
      });
      // Over the object limit: streamed through to the viewer, never kept.
      res.writeHead(200, {
        "content-type": "application/octet-stream",
        "content-length": String(BIG.length),
      });
      res.end(BIG);
    });
  });
  afterAll(async () => {
    await t.close();
    await origin.close();
  });

  it("has its connection, and the origin's, closed once nothing moved for the idle timeout", async () => {
    const host = uniqueHost("idle");
    await createDistribution(t, { hostname: host, origin_url: origin.url });
    const edge = new URL(edgeUrlOf(t));
    const socket = connect(Number(edge.port), edge.hostname);
    let closed = false;
    socket.on("close", () => {
      closed = true;
    });
    socket.on("error", () => undefined);
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    socket.write(`GET /${host}/big.bin HTTP/1.1\r\nHost: ${edge.host}\r\n\r\n`);
    // Reads nothing: the answer fills the buffers between them and the edge stops writing. Once the
    // edge has closed the viewer's connection it lets the origin's go.
    socket.pause();
    await waitUntil(() => originClosed, 15_000, "the origin's connection closed");
    // The viewer reads again: what the kernel held, then the end of a connection the edge closed.
    socket.resume();
    await waitUntil(() => closed, 15_000, "the viewer's connection closed");
    expect([originClosed, closed]).toEqual([true, true]);
    socket.destroy();
  });
});
