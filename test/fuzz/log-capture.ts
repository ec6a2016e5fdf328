import { Writable } from "node:stream";
import type { FastifyBaseLogger } from "fastify";
import pino from "pino";

/** A server logger that keeps every line at `level` or above, for tests that check what was logged. */
export function capturingLogger(level = "warn"): {
  logger: FastifyBaseLogger;
  lines: Record<string, unknown>[];
} {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line.trim() !== "") lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  return { logger: pino({ level, base: undefined }, sink) as FastifyBaseLogger, lines };
}

/** Lines at `error` (50) or above, shortened for a failure message. */
export const errorLines = (lines: Record<string, unknown>[]): string[] =>
  lines.filter((line) => Number(line.level) >= 50).map((line) => JSON.stringify(line).slice(0, 600));
