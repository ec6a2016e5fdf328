import type { IncomingMessage } from "node:http";
import { EdgeCache } from "../src/cdn/edge/cache.ts";
import { EdgeCachePolicy, type Resolved } from "../src/cdn/edge/cache-policy.ts";
import { systemClock } from "../src/clock.ts";

/**
 * What the edge's memory cache holds in the process's heap against the bound it is given
 * (CUMULO_EDGE_CACHE_BYTES): filled past its bound with small objects as a browser asks for them,
 * the heap's growth after a full collection, divided by the bound. Run with
 * `node --expose-gc --import tsx bench/edge-cache-memory.ts`; EDGE_MEMORY_BODY_BYTES sets the
 * objects' size (1024), EDGE_MEMORY_BETWEEN=0 leaves out the short-lived buffers made between them.
 */
const BOUND = 16 * 1024 * 1024;
const BODY_BYTES = Number(process.env.EDGE_MEMORY_BODY_BYTES ?? 1024);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");

const browser = {
  host: "cdn.example.com",
  "user-agent":
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  accept: "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8",
  "accept-encoding": "gzip, deflate, br, zstd",
  "accept-language": "en-GB,en;q=0.9",
  referer: "https://www.example.com/articles/a-long-article-name",
  "sec-fetch-dest": "image",
  "sec-fetch-mode": "no-cors",
  "sec-fetch-site": "same-site",
};
const originHeaders = () => ({
  "content-type": "image/png",
  "content-length": String(BODY_BYTES),
  "cache-control": "public, max-age=3600",
  etag: `"${Math.random().toString(36).slice(2)}"`,
  "last-modified": new Date().toUTCString(),
  date: new Date().toUTCString(),
});

function heapUsed(): number {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
}

const policy = new EdgeCachePolicy(systemClock);
const cache = new EdgeCache(BOUND);
const distribution = {
  id: "6f1c1d1e-0000-4000-8000-000000000001",
  hostname: "cdn.example.com",
  default_ttl_s: 3600,
};
// What loading the modules left is collected before the first reading.
await new Promise((resolve) => setTimeout(resolve, 100));
const before = heapUsed();
let stored = 0;
let madeMeanwhile = 0;
for (let i = 0; stored * BODY_BYTES < BOUND * 2; i++) {
  const pathAndQuery = `/images/${i}/picture-of-something.png?v=${i}`;
  const resolved = { distribution, pathAndQuery } as unknown as Resolved;
  const request = { headers: browser, method: "GET", url: pathAndQuery } as unknown as IncomingMessage;
  const headers = originHeaders();
  const cachePolicy = policy.forResponse(request, resolved, 200, headers);
  // As the origin fetch collects it (a body under 4 KiB from Node's shared pool), between the
  // short-lived small buffers a server makes meanwhile (none with EDGE_MEMORY_BETWEEN=0).
  const body = Buffer.concat([Buffer.alloc(BODY_BYTES / 2, 1), Buffer.alloc(BODY_BYTES / 2, 2)], BODY_BYTES);
  if (process.env.EDGE_MEMORY_BETWEEN !== "0") {
    madeMeanwhile += Buffer.from(`a header line of request ${i}`.repeat(40)).length;
  }
  cache.set(distribution.id, pathAndQuery, browser, policy.cachedObject(200, headers, body, cachePolicy), 0);
  stored++;
}
const held = heapUsed() - before;
if (cache.size === 0) throw new Error("nothing was stored");
console.log(
  `${cache.size} kept, counted as ${cache.bytes} bytes (${Math.round(cache.bytes / cache.size)} each), held ${Math.round(held / cache.size)} each; objects of ${BODY_BYTES} bytes, ${stored} stored past a bound of ${BOUND} bytes (${madeMeanwhile} bytes of short-lived buffers made between): heap grew by ${held} bytes, ${(held / BOUND).toFixed(2)} of the bound`,
);
