import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onSendHookHandler,
  RouteHandlerMethod,
} from "fastify";
import { LRUCache } from "lru-cache";
import { timesClockRead } from "../clock.ts";
import { credentialOf } from "../identity/service.ts";
import type { StoreGeneration } from "../store/database.ts";

declare module "fastify" {
  interface FastifyContextConfig {
    /**
     * A GET whose answer is made only from stored data and the request (its URL, host and caller):
     * no in-memory state, files or outside systems. Its answers are kept and served again while
     * nothing stored has changed (`registerResponseCache`).
     */
    storedDataOnly?: boolean;
  }
}

interface Answer {
  generation: number;
  contentType: string;
  payload: string;
}

/** An answer being made on a miss, and what it must not have seen change to be kept. */
interface Pending {
  key: string;
  generation: number;
  clockReads: number;
}

const MAX_BYTES = 16 * 1024 * 1024;
const MAX_ENTRY_BYTES = 512 * 1024;

/** Who asks what: the organization and credential (answers differ by caller), the host and the URL. */
const keyOf = (request: FastifyRequest): string =>
  `${request.auth.organizationId}\u0000${credentialOf(request.auth)}\u0000${request.headers.host ?? ""}\u0000${request.url}`;

const headerNames = (reply: FastifyReply): string => Object.keys(reply.getHeaders()).join(",");

/**
 * Serialized answers of `storedDataOnly` routes, kept per caller and URL and served again, without
 * running the route or its serializer, while the store's generation holds. That generation changes
 * before any write of this process runs and whenever another process commits (SQLite's
 * `data_version`; PostgreSQL's notifications, waited for with `caughtUp` before each answer), so a
 * kept answer is always the one the route would make now. An answer is kept only if it is a 200 with
 * a text payload, made without the generation moving, without reading the clock, and without the
 * route setting a header of its own (a kept answer carries only its content type); hooks
 * (authentication, rate limits, request ids, developer-mode faults) run on every request.
 */
export function registerResponseCache(app: FastifyInstance, generation: StoreGeneration): void {
  const answers = new LRUCache<string, Answer>({
    maxSize: MAX_BYTES,
    maxEntrySize: MAX_ENTRY_BYTES,
    sizeCalculation: (answer, key) => (answer.payload.length + key.length) * 2,
  });
  const pending = new WeakMap<FastifyRequest, Pending>();

  const keepAnswer: onSendHookHandler = (request, reply, payload, done) => {
    const made = pending.get(request);
    if (
      made &&
      reply.statusCode === 200 &&
      typeof payload === "string" &&
      made.generation === generation.current() &&
      made.clockReads === timesClockRead()
    ) {
      const contentType = String(reply.getHeader("content-type"));
      answers.set(made.key, { generation: made.generation, contentType, payload });
    }
    done(null, payload);
  };

  app.addHook("onRoute", (route) => {
    if (!route.config?.storedDataOnly || route.method !== "GET") return;
    const handler = route.handler as RouteHandlerMethod;
    route.handler = async function answerFromCache(request, reply) {
      // Answers are kept per caller; a route nobody authenticated for is simply run.
      if (!request.auth) return handler.call(this, request, reply);
      // SQLite knows at once; only PostgreSQL waits (a bare `await` would cost SQLite a promise job).
      if (generation.caughtUp) await generation.caughtUp();
      const now = generation.current();
      // While the store cannot say what changed, every route is simply run.
      if (now === undefined) return handler.call(this, request, reply);
      const key = keyOf(request);
      const kept = answers.get(key);
      if (kept?.generation === now) return reply.type(kept.contentType).send(kept.payload);
      const clockReads = timesClockRead();
      const headersBefore = headerNames(reply);
      const result = await handler.call(this, request, reply);
      if (!reply.sent && headerNames(reply) === headersBefore) {
        pending.set(request, { key, generation: now, clockReads });
      }
      return result;
    };
    route.onSend = [...(route.onSend ? [route.onSend].flat() : []), keepAnswer];
  });
}
