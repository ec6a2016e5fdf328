import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import type { Config } from "../config.ts";
import { CONSOLE_ASSETS_PATH } from "../console/pages.ts";
import { createBoundedServer } from "../http/listener.ts";
import type { Store } from "../store/database.ts";
import { type Metrics, metricsExposed } from "./metrics.ts";
import { HEALTHY, readiness } from "./routes.ts";

const digest = (text: string) => createHash("sha256").update(text).digest();

/** Whether an `Authorization` header carries the token; compared in constant time. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const given = /^Bearer (\S+)$/i.exec(header ?? "")?.[1];
  return given !== undefined && timingSafeEqual(digest(given), digest(token));
}

const UNAUTHORIZED = JSON.stringify({ error: "unauthorized", message: "A valid metrics token is required" });
const NOT_FOUND = JSON.stringify({ error: "not_found", message: "Resource not found" });
const STOPPING = { code: 503, body: { status: "stopping" } } as const;
/** Routes of operators' tools, not of the API's customers: left out of the API's request counts. */
const OPERATIONS_ROUTES = new Set(["/metrics", "/healthz", "/readyz"]);

/**
 * Counts every API answer, and serves `/metrics` on the API port when a token is set and no
 * listener of its own is (otherwise that path stays an unknown one: 404).
 */
export function registerMetrics(app: FastifyInstance, metrics: Metrics, config: Config): void {
  // With /metrics off no request pays for the count.
  if (!metricsExposed(config)) return;
  const gets = new Set<string>();
  app.addHook("onRoute", ({ url, method }) => {
    // The console's built files change names with every build: series made ahead for them would
    // pile up in Prometheus from deploy to deploy.
    if (OPERATIONS_ROUTES.has(url) || url.startsWith(CONSOLE_ASSETS_PATH)) return;
    const methods = [method].flat();
    if (methods.includes("GET")) gets.add(url);
    for (const each of methods) {
      // The HEAD twin of a GET (Fastify's, made right after it, or one route of both) would double
      // the series for requests hardly anyone sends; a HEAD of its own (tus's offset query) is an
      // operation.
      if (each !== "HEAD" || !gets.has(url)) metrics.routeAdded(url, each);
    }
  });
  app.addHook("onResponse", (request, reply, done) => {
    const route = request.routeOptions.url;
    // Not customers' requests: scrapes and balancers' probes thinned the error ratio and latency of
    // the API's alerts, and a probe's 503 counted as an API error (QA of session 48).
    if (route === undefined || !OPERATIONS_ROUTES.has(route)) {
      metrics.httpResponse(route, request.method, reply.statusCode, reply.elapsedTime);
    }
    done();
  });
  const { token, port } = config.metrics;
  if (token === undefined || port !== undefined) return;
  app.get(
    "/metrics",
    {
      // For operators, not API customers: left out of the API document.
      schema: { hide: true, operationId: "getMetrics", tags: ["operations"], summary: "Prometheus metrics" },
      config: { rateLimit: false },
    },
    async (request, reply) => {
      if (!bearerMatches(request.headers.authorization, token)) {
        return reply
          .code(401)
          .header("www-authenticate", "Bearer")
          .type("application/json; charset=utf-8")
          .send(UNAUTHORIZED);
      }
      const { contentType, body } = await metrics.render();
      return reply.header("cache-control", "no-store").type(contentType).send(body);
    },
  );
}

/**
 * The listener of `CUMULO_METRICS_PORT`: `GET /metrics`, with the token when one is set, and the
 * probes `/healthz` and `/readyz` as the API port answers them, for nodes without an API port
 * (worker-only and edge-only nodes have nothing else an orchestrator could ask).
 */
export class MetricsListener {
  readonly #server;
  #stopping = false;

  constructor(
    private readonly deps: { config: Config; logger: FastifyBaseLogger },
    private readonly metrics: Metrics,
    /** The store, which `/readyz` asks as on the API port. */
    private readonly store: Pick<Store, "readiness">,
  ) {
    this.#server = createBoundedServer(deps, (request, response) => {
      this.#answer(request, response).catch((error: unknown) => {
        deps.logger.error({ err: error }, "metrics scrape failed");
        if (!response.headersSent) send(response, 500, "application/json; charset=utf-8", "{}");
        else response.destroy();
      });
    });
  }

  /** Binds `CUMULO_METRICS_HOST:CUMULO_METRICS_PORT`; resolves to the listener's URL. */
  async start(host: string, port: number): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once("error", (error) =>
        reject(
          new Error(
            `cannot listen on ${host}:${port} (CUMULO_METRICS_HOST, CUMULO_METRICS_PORT): ${error.message}`,
          ),
        ),
      );
      this.#server.listen(port, host, () => {
        this.#server.removeAllListeners("error");
        resolve();
      });
    });
    const address = this.#server.address() as AddressInfo;
    return `http://${host.includes(":") ? `[${host}]` : host}:${address.port}`;
  }

  /**
   * The node has begun to shut down: `/readyz` answers 503 from now on, while this listener stays
   * open for the last scrapes. Its API or edge listener no longer takes connections, so a balancer
   * that probes here must take the node out now, not once the workers have finished.
   */
  stopping(): void {
    this.#stopping = true;
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#server.closeAllConnections();
    await closed;
  }

  async #answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? "/").split("?")[0];
    if (request.method !== "GET" && request.method !== "HEAD") {
      send(response, 404, "application/json; charset=utf-8", NOT_FOUND);
      return;
    }
    if (path === "/healthz") {
      send(response, 200, "application/json; charset=utf-8", JSON.stringify(HEALTHY));
      return;
    }
    if (path === "/readyz") {
      const { code, body } = this.#stopping ? STOPPING : await readiness(this.store);
      send(response, code, "application/json; charset=utf-8", JSON.stringify(body));
      return;
    }
    if (path !== "/metrics") {
      send(response, 404, "application/json; charset=utf-8", NOT_FOUND);
      return;
    }
    const { token } = this.deps.config.metrics;
    if (token !== undefined && !bearerMatches(request.headers.authorization, token)) {
      response.setHeader("www-authenticate", "Bearer");
      send(response, 401, "application/json; charset=utf-8", UNAUTHORIZED);
      return;
    }
    const { contentType, body } = await this.metrics.render();
    send(response, 200, contentType, request.method === "HEAD" ? "" : body, Buffer.byteLength(body));
  }
}

function send(
  response: ServerResponse,
  status: number,
  contentType: string,
  body: string,
  length = Buffer.byteLength(body),
): void {
  response.writeHead(status, {
    "content-type": contentType,
    "content-length": length,
    "cache-control": "no-store",
  });
  response.end(body);
}
