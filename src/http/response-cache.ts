import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onSendHookHandler,
  preParsingHookHandler,
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
 * route setting a header of its own (a kept answer carries only its content type).
 *
 * A kept answer is sent from the route's last `preParsing` hook, after authentication and the rate
 * limit: the checks after it (`preValidation` hooks and schema validation) depend only on the caller
 * and the URL, which the answer's key holds, and passed when it was made. With `answerEarly` off
 * (developer mode, whose injected faults are `preHandler` hooks, docs/dev-mode.md) it is sent from the
 * handler instead. Every request's `onRequest`, `onSend` and `onResponse` hooks run either way.
 */
export function registerResponseCache(
  app: FastifyInstance,
  generation: StoreGeneration,
  { answerEarly }: { answerEarly: boolean },
): void {
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

  /** Sends the request's kept answer if it is still current; says whether it did. */
  const sentKept = (request: FastifyRequest, reply: FastifyReply): boolean => {
    const now = generation.current();
    // While the store cannot say what changed, every route is simply run.
    if (now === undefined) return false;
    const kept = answers.get(keyOf(request));
    if (kept?.generation !== now) return false;
    reply.type(kept.contentType).send(kept.payload);
    return true;
  };

  /** `sentKept` once the store's changes so far are heard: SQLite knows at once, PostgreSQL waits. */
  const answeredFromKept = (request: FastifyRequest, reply: FastifyReply): boolean | Promise<boolean> =>
    generation.caughtUp
      ? generation.caughtUp().then(() => sentKept(request, reply))
      : sentKept(request, reply);

  // A callback hook: on SQLite a kept answer costs no promise. Once the answer is sent, `done` is not
  // called, so no later hook or the route runs.
  const answerKeptEarly: preParsingHookHandler = (request, reply, payload, done) => {
    // Answers are kept per caller; a route nobody authenticated for is simply run.
    if (!request.auth) return done(null, payload);
    const sent = answeredFromKept(request, reply);
    if (sent === false) return done(null, payload);
    if (sent !== true) sent.then((wasSent) => wasSent || done(null, payload), done);
  };

  app.addHook("onRoute", (route) => {
    if (!route.config?.storedDataOnly || route.method !== "GET") return;
    const handler = route.handler as RouteHandlerMethod;
    route.handler = async function answerFromCache(request, reply) {
      if (!request.auth) return handler.call(this, request, reply);
      if (!answerEarly && (await answeredFromKept(request, reply))) return reply;
      // Read after the wait for the store's changes (in `answerKeptEarly` or just above).
      const now = generation.current();
      if (now === undefined) return handler.call(this, request, reply);
      const clockReads = timesClockRead();
      const headersBefore = headerNames(reply);
      const result = await handler.call(this, request, reply);
      if (!reply.sent && headerNames(reply) === headersBefore) {
        pending.set(request, { key: keyOf(request), generation: now, clockReads });
      }
      return result;
    };
    // After every route-level hook added before this one: the rate limit's is one of them (app.ts).
    if (answerEarly)
      route.preParsing = [...(route.preParsing ? [route.preParsing].flat() : []), answerKeptEarly];
    route.onSend = [...(route.onSend ? [route.onSend].flat() : []), keepAnswer];
  });
}
