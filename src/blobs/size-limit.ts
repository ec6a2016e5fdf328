import { Transform, type TransformCallback } from "node:stream";
import { BlobTooLargeError } from "./store.ts";

/** Counts bytes as they pass and fails the stream as soon as the limit is crossed. */
export class SizeLimit extends Transform {
  bytes = 0;
  /** Set once the limit was crossed, so a store can tell this failure from the ones it causes downstream. */
  exceeded: BlobTooLargeError | undefined;

  constructor(private readonly maxBytes: number) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.maxBytes) {
      this.exceeded = new BlobTooLargeError(this.maxBytes);
      callback(this.exceeded);
      return;
    }
    callback(null, chunk);
  }
}
