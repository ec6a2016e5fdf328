import { randomUUID } from "node:crypto";
import { createSocket, type Socket } from "node:dgram";
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  request,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import * as dnsPacket from "dns-packet";
import type { Clock } from "../../src/clock.ts";
import type { TestApp } from "../support/app.ts";

export type OriginHandler = (req: IncomingMessage, res: ServerResponse) => unknown;

/**
 * A real origin server on loopback that counts the requests it gets per path (query included), and
 * the TCP connections they came on.
 */
export interface Origin {
  url: string;
  hits: Map<string, number>;
  hitsOf(pathAndQuery: string): number;
  /** How many TCP connections have been opened to it. */
  connections(): number;
  route(path: string, handler: OriginHandler): void;
  close(): Promise<void>;
}

export async function startOrigin(): Promise<Origin> {
  const hits = new Map<string, number>();
  const routes = new Map<string, OriginHandler>();
  const server = createServer((req, res) => {
    const url = req.url ?? "/";
    hits.set(url, (hits.get(url) ?? 0) + 1);
    const handler = routes.get(url.split("?")[0] ?? "/");
    if (!handler) {
      res.writeHead(404, { "content-type": "text/plain" }).end("no such object");
      return;
    }
    Promise.resolve(handler(req, res)).catch(() => res.destroy());
  });
  let connections = 0;
  server.on("connection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    hitsOf: (pathAndQuery) => hits.get(pathAndQuery) ?? 0,
    connections: () => connections,
    route: (path, handler) => routes.set(path, handler),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A DNS server on loopback (UDP) that answers TXT questions from `records` (name -> values, each value
 * one or more strings), SERVFAIL to questions for the names in `failing`, NXDOMAIN to everything else.
 */
export interface DnsServer {
  /** `127.0.0.1:port`, as CUMULO_DNS_SERVERS takes it. */
  address: string;
  records: Map<string, string[][]>;
  failing: Set<string>;
  close(): Promise<void>;
}

const SERVFAIL = 2;
const NXDOMAIN = 3;

export async function startDnsServer(): Promise<DnsServer> {
  const records = new Map<string, string[][]>();
  const failing = new Set<string>();
  const socket: Socket = createSocket("udp4");
  socket.on("message", (message, from) => {
    let query: dnsPacket.DecodedPacket;
    try {
      query = dnsPacket.decode(message);
    } catch {
      return; // not a DNS message: no answer, as a server drops it
    }
    const question = query.questions?.[0];
    const name = question?.name.toLowerCase() ?? "";
    const values = question?.type === "TXT" ? records.get(name) : undefined;
    const rcode = failing.has(name) ? SERVFAIL : values ? 0 : NXDOMAIN;
    const answer = dnsPacket.encode({
      type: "response",
      id: query.id,
      flags: dnsPacket.AUTHORITATIVE_ANSWER | rcode,
      questions: query.questions,
      answers: (values ?? []).map((strings) => ({
        type: "TXT" as const,
        name: question?.name ?? "",
        class: "IN" as const,
        ttl: 0,
        data: strings,
      })),
    });
    socket.send(answer, from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  const { port } = socket.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    records,
    failing,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

export interface EdgeResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

/** A request to an edge listener; `host` sets the Host header (host-style addressing). */
export function edgeRequest(
  edgeUrl: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; host?: string } = {},
): Promise<EdgeResponse> {
  const url = new URL(edgeUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        hostname: url.hostname,
        port: url.port,
        path, // sent as given: no dot-segment normalization
        method: options.method ?? "GET",
        headers: { ...(options.host ? { host: options.host } : {}), ...options.headers },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const body = Buffer.concat(chunks);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString("utf8") });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** Creates a distribution through the API and returns it. */
export async function createDistribution(
  t: TestApp,
  body: { hostname: string; origin_url: string; default_ttl_s?: number },
  key?: string,
): Promise<{ id: string; hostname: string }> {
  const created = await t.request("POST", "/v1/cdn/distributions", { json: body, ...(key ? { key } : {}) });
  if (created.status !== 201) throw new Error(`create distribution: ${created.status} ${created.text}`);
  return created.body.data;
}

/**
 * Writes a distribution (the admin organization's unless told) straight into the store, behind the
 * API's back, as another version or an earlier setting left it (the verification columns only when
 * given, as a version before 0706 writes none).
 */
export async function insertDistributionRow(
  t: TestApp,
  row: { hostname: string; origin_url: string; hostname_token?: string; hostname_verified_at?: null },
  organizationId?: string,
): Promise<string> {
  const owner =
    organizationId ?? (await t.cumulo.services.identity.authenticate(t.adminKey))?.organizationId ?? "";
  const now = new Date().toISOString();
  const id = randomUUID();
  await t.cumulo.store.db
    .insertInto("cdn_distributions")
    .values({
      ...row,
      id,
      organization_id: owner,
      default_ttl_s: 60,
      status: "active",
      library_id: null,
      created_at: now,
      updated_at: now,
    })
    .execute();
  return id;
}

let counter = 0;
/** A host name no other test uses. */
export const uniqueHost = (label = "cdn"): string =>
  `${label}-${process.pid}-${Date.now().toString(36)}-${counter++}.example.test`;

/** The edge URL of a test app started with the edge role on. */
export function edgeUrlOf(t: TestApp): string {
  const url = t.cumulo.edgeUrl;
  if (!url) throw new Error("the test app runs no edge");
  return url;
}

export const EDGE_ENV = { CUMULO_EDGE_PORT: "0", CUMULO_ORIGIN_ALLOW_PRIVATE: "true" };

/**
 * A clock the test moves: the real time shifted by `advance()`, or, when started at a given instant,
 * that instant (frozen) plus whatever was advanced. What is fresh goes stale without waiting.
 */
export class TestClock implements Clock {
  #offsetMs = 0;

  constructor(private readonly frozenAt?: Date) {}

  now(): Date {
    return new Date((this.frozenAt?.getTime() ?? Date.now()) + this.#offsetMs);
  }

  advance(ms: number): void {
    this.#offsetMs += ms;
  }
}
