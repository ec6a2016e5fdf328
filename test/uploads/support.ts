import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { Upload, type UploadOptions } from "tus-js-client";
import { VideoProcessingRepository } from "../../src/video/repository.ts";
import type { TestApp } from "../support/app.ts";

export const TUS_PATH = "/v1/media/tus";

/** Runs a tus-js-client upload to its end; rejects with the client's error. */
export function runUpload(file: Buffer, options: UploadOptions): Promise<Upload> {
  return new Promise((resolve, reject) => {
    const upload: Upload = new Upload(file, {
      retryDelays: [],
      ...options,
      onSuccess: () => resolve(upload),
      onError: (error) => reject(error),
    });
    upload.start();
  });
}

export const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

/** The bytes Cumulo stored as the video's current source (read from the blob store's files). */
export async function storedSource(t: TestApp, videoId: string): Promise<Buffer> {
  const row = await new VideoProcessingRepository(t.cumulo.store.db).find(videoId);
  if (!row) throw new Error("the video has no source");
  return readFileSync(join(t.store.dataDir, "blobs", ...row.source_key.split("/")));
}

/**
 * A TCP proxy in front of the API that can cut a connection passing through it. After
 * `holdAfter(n)`, the first connection that has sent `n` bytes towards the server stops being
 * forwarded (`held` resolves); `cutHeld()` then drops it: the client sees its request fail, the
 * server has received what was forwarded so far.
 */
export interface CuttingProxy {
  url: string;
  cuts: number;
  holdAfter(bytes: number): Promise<void>;
  cutHeld(): void;
  close(): Promise<void>;
}

export async function startCuttingProxy(target: string): Promise<CuttingProxy> {
  const { hostname, port } = new URL(target);
  let holdAt: number | undefined;
  let onHeld: (() => void) | undefined;
  let held: { client: Socket; upstream: Socket } | undefined;
  const sockets = new Set<Socket>();
  const proxy: CuttingProxy = {
    url: "",
    cuts: 0,
    holdAfter: (bytes) =>
      new Promise<void>((resolve) => {
        holdAt = bytes;
        onHeld = resolve;
      }),
    cutHeld: () => {
      if (!held) throw new Error("no connection is held");
      proxy.cuts += 1;
      held.client.destroy();
      held.upstream.end();
      held = undefined;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  const server: Server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    sockets.add(client).add(upstream);
    let forwarded = 0;
    client.on("data", (chunk: Buffer) => {
      forwarded += chunk.length;
      upstream.write(chunk);
      if (holdAt !== undefined && forwarded >= holdAt) {
        holdAt = undefined;
        client.pause();
        held = { client, upstream };
        onHeld?.();
      }
    });
    upstream.on("data", (chunk: Buffer) => client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}
