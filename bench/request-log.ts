import { cpuUsage } from "node:process";
import Fastify, { type FastifyBaseLogger, LogController } from "fastify";
import pino from "pino";
import { RequestLog } from "../src/http/request-log.ts";
import { median } from "./figures.ts";

/**
 * CPU time per request of request logging at `info`, in one process: a bare Fastify route with
 * Fastify's own two lines per request (received, completed), with Cumulo's one line (RequestLog),
 * and with nothing logged (`warn`), served through `app.inject` in alternating blocks of
 * LOG_REQUESTS (5000), LOG_ROUNDS (7) times. Lines go to /dev/null. Prints median (min-max) µs.
 */

const REQUESTS = Number(process.env.LOG_REQUESTS ?? 5000);
const ROUNDS = Number(process.env.LOG_ROUNDS ?? 7);

async function app(level: string, logController: LogController) {
  const logger = pino({ level, base: undefined }, pino.destination("/dev/null")) as FastifyBaseLogger;
  const server = Fastify({ loggerInstance: logger, logController });
  server.get("/v1/thing/:id", async () => ({ success: true, data: { id: 1, name: "thing" } }));
  await server.ready();
  return server;
}

const builds = {
  "two lines (Fastify)": await app("info", new LogController()),
  "one line (RequestLog)": await app("info", new RequestLog()),
  "none (warn)": await app("warn", new RequestLog()),
};
const figures = new Map<string, number[]>(Object.keys(builds).map((name) => [name, []]));
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, server] of Object.entries(builds)) {
    const start = cpuUsage();
    for (let i = 0; i < REQUESTS; i++) await server.inject({ method: "GET", url: `/v1/thing/${i}?limit=20` });
    const used = cpuUsage(start);
    figures.get(name)?.push((used.user + used.system) / REQUESTS);
  }
}
for (const [name, values] of figures) {
  console.log(
    `${name.padEnd(24)} ${median(values).toFixed(1)} µs/request (${Math.min(...values).toFixed(1)}-${Math.max(...values).toFixed(1)})`,
  );
}
await Promise.all(Object.values(builds).map((server) => server.close()));
