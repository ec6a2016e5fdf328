import { existsSync } from "node:fs";
import { join } from "node:path";
import compress from "@fastify/compress";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance, FastifyReply } from "fastify";

export interface ConsolePagesOptions {
  /** The console's build output (index.html and assets/), from CUMULO_CONSOLE_DIR. */
  dir: string;
}

/** Vite names every file under assets/ after a hash of its content, so a name never changes meaning. */
const IMMUTABLE = "public, max-age=31536000, immutable";
/** index.html names the current assets: browsers ask again each time. */
const REVALIDATE = "no-cache";

const NOT_BUILT_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Cumulo console not built</title></head>
<body><h1>The Cumulo console has not been built</h1>
<p>Build it with <code>npm run console:build</code> (<code>npm ci</code> does it too), or point
<code>CUMULO_CONSOLE_DIR</code> at a built console, then restart Cumulo. The API itself works.</p>
</body></html>
`;

/**
 * Scripts and styles only from the console's own files, so injected markup cannot run. Videos,
 * thumbnails and playlists come from the edge (another port or host, named by the API's answers),
 * and hls.js plays through blob: URLs and may run a worker from one.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob: http: https:",
  "media-src 'self' blob: http: https:",
  "connect-src 'self' http: https:",
  "worker-src 'self' blob:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

function pageHeaders(reply: FastifyReply): FastifyReply {
  return (
    reply
      .header("cache-control", REVALIDATE)
      // Compressed or not by the request's Accept-Encoding: a shared cache must keep both.
      .header("vary", "accept-encoding")
      .header("x-content-type-options", "nosniff")
      .header("x-frame-options", "DENY")
      // Cross-origin requests (the player's, to the edge) carry the console's origin alone: a library
      // whose referrer allow list names the console's host can be previewed here (QA of 6 December).
      .header("referrer-policy", "strict-origin-when-cross-origin")
      .header("content-security-policy", CONTENT_SECURITY_POLICY)
  );
}

/** Where the console's built files are served, each named by its content's hash (so each build has others). */
export const CONSOLE_ASSETS_PATH = "/console/assets/";

/**
 * The web console: static files at /console, every other /console/* path answered with index.html
 * so the browser's router shows the page. Compression is registered here only, so API answers are
 * unchanged.
 */
export async function consolePages(app: FastifyInstance, { dir }: ConsolePagesOptions) {
  const hide = { schema: { hide: true } };
  if (!existsSync(join(dir, "index.html"))) {
    const notBuilt = async (_request: unknown, reply: FastifyReply) =>
      pageHeaders(reply).code(503).type("text/html; charset=utf-8").send(NOT_BUILT_PAGE);
    app.get("/console", hide, notBuilt);
    app.get("/console/*", hide, notBuilt);
    return;
  }
  await app.register(compress, { global: true, threshold: 1024 });
  await app.register(fastifyStatic, {
    root: dir,
    prefix: "/console/",
    // Files are listed once at start-up (a rebuilt console is served after a restart); paths that
    // name no file fall through to the index.html route below.
    wildcard: false,
    index: false,
    cacheControl: false,
    setHeaders: (response, path) => {
      response.setHeader("cache-control", path.includes("/assets/") ? IMMUTABLE : REVALIDATE);
      response.setHeader("vary", "accept-encoding");
      response.setHeader("x-content-type-options", "nosniff");
      // `index.html` is also served by its own name: framed, the signed-in console could be clicked
      // through by another page of the same site (a tenant's page on the edge, another port).
      response.setHeader("x-frame-options", "DENY");
      response.setHeader("referrer-policy", "strict-origin-when-cross-origin");
      response.setHeader("content-security-policy", CONTENT_SECURITY_POLICY);
    },
  });
  const page = async (_request: unknown, reply: FastifyReply) =>
    pageHeaders(reply).sendFile("index.html", { cacheControl: false });
  app.get("/console", hide, page);
  app.get("/console/*", hide, page);
  // An asset name that is not in this build (an old tab after a deploy) is a plain 404, not the page.
  app.get(`${CONSOLE_ASSETS_PATH}*`, hide, async (_request, reply) =>
    reply.code(404).type("text/plain; charset=utf-8").send("Not found: reload the console"),
  );
}
