import { randomUUID } from "node:crypto";
import type { Redis, RedisOptions } from "ioredis";
import { REDIS_START_TIMEOUT_MS } from "./config.ts";

export type BusHandler = (message: string) => void | Promise<void>;

/**
 * Notifications every node must see (cache purges, key revocations). `publish` runs this node's
 * handlers before it returns, then reaches the other nodes through Redis when configured.
 */
export interface Bus {
  /** Resolves to how many other nodes listen on the channel and were sent the message. */
  publish(channel: string, message: string): Promise<number>;
  subscribe(channel: string, handler: BusHandler): Promise<void>;
  /**
   * Runs `listener` whenever this node is listening again after losing its connection to the other
   * nodes: messages sent meanwhile are lost, so what they would have invalidated must be dropped.
   */
  onReconnect(listener: () => void): void;
  /**
   * Runs every node's `onReconnect` listeners: the store changed under the caches (a developer-mode
   * reset or snapshot load), so what they hold is dropped as after a lost connection.
   */
  dropCaches(): Promise<void>;
  close(): Promise<void>;
}

const DROP_CACHES_CHANNEL = "bus.drop-caches";

/**
 * Redis could not take a message for the other nodes (it is away): this node's handlers have run,
 * the others did not hear it. Whoever published decides whether that may pass (a change the others
 * also learn from the store soon) or must be refused (a purge they would never apply).
 */
export class BusUnavailableError extends Error {
  constructor(cause: unknown) {
    super("Redis is unavailable: the message did not reach the other nodes", { cause });
  }
}

/** For messages the other nodes may miss: their caches of it expire, or are dropped when they reconnect. */
export const unlessBusUnavailable = (error: unknown): number => {
  if (error instanceof BusUnavailableError) return 0;
  throw error;
};

class LocalHandlers {
  readonly #handlers = new Map<string, BusHandler[]>();

  add(channel: string, handler: BusHandler): boolean {
    const existing = this.#handlers.get(channel);
    this.#handlers.set(channel, [...(existing ?? []), handler]);
    return existing === undefined;
  }

  async run(channel: string, message: string): Promise<void> {
    for (const handler of this.#handlers.get(channel) ?? []) await handler(message);
  }
}

export class LocalBus implements Bus {
  readonly #handlers = new LocalHandlers();

  async publish(channel: string, message: string): Promise<number> {
    await this.#handlers.run(channel, message);
    return 0;
  }

  async subscribe(channel: string, handler: BusHandler): Promise<void> {
    this.#handlers.add(channel, handler);
  }

  readonly #reconnectListeners: (() => void)[] = [];

  /** One process: nothing can be missed, so these run only on `dropCaches`. */
  onReconnect(listener: () => void): void {
    this.#reconnectListeners.push(listener);
  }

  async dropCaches(): Promise<void> {
    for (const listener of this.#reconnectListeners) listener();
  }

  async close(): Promise<void> {}
}

/**
 * How long a command may wait for Redis's answer: then it fails, and its connection is taken for dead
 * (ioredis drops it and connects again; meanwhile the node counts budgets on its own). Redis answers
 * in well under a millisecond; one that takes connections and stops answering (a frozen process, a
 * network dropping packets) otherwise held every request waiting for its rate-limit count for as
 * long as its client waited (session 59). Both timeouts are needed: a command on a connection
 * dropped so is kept to be sent again once Redis is back, and waited until then without its own.
 * Two seconds, not less: a process paused that long by a loaded machine runs its timers before it
 * reads the answers that arrived meanwhile, and would drop a connection that was answering.
 */
export const REDIS_ANSWER_TIMEOUT_MS = 2000;

/**
 * Opens a Redis connection and waits until it is ready. Nothing may be sent before that: a SUBSCRIBE
 * sent while ioredis still runs its ready check puts the connection in subscriber mode, the check
 * fails, and the reconnect that follows drops the subscription.
 */
export async function connectRedis(
  url: string,
  onError: (error: Error) => void,
  options: RedisOptions,
  readyTimeoutMs: number,
): Promise<Redis> {
  // Loaded only by a node configured with Redis: a single node starts without it.
  const { Redis: RedisClient } = await import("ioredis");
  const client = new RedisClient(url, {
    socketTimeout: REDIS_ANSWER_TIMEOUT_MS,
    commandTimeout: REDIS_ANSWER_TIMEOUT_MS,
    ...options,
  });
  // Until it is ready, each failed try is kept rather than logged: start-up fails with one line.
  let lastError: Error | undefined;
  const keepError = (error: Error) => {
    lastError = error;
  };
  client.on("error", keepError);
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), readyTimeoutMs);
    client.once("ready", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  if (!ready) {
    client.disconnect();
    const why = lastError ? ` (${lastError.message})` : "";
    throw new Error(`Redis (REDIS_URL) did not answer within ${readyTimeoutMs / 1000} s${why}`);
  }
  // While Redis stays away ioredis reports every failed reconnect, several a second on each of a
  // node's connections: the first error of an outage is passed on, the rest are not until the
  // connection has been ready again (`cumulo_redis_up` tells how long it lasted).
  let reported = false;
  client
    .on("error", (error: Error) => {
      if (reported) return;
      reported = true;
      onError(error);
    })
    .on("ready", () => {
      reported = false;
    })
    .off("error", keepError);
  return client;
}

export class RedisBus implements Bus {
  readonly #nodeId = randomUUID();
  readonly #handlers = new LocalHandlers();
  readonly #reconnectListeners: (() => void)[] = [];
  /** Channels whose SUBSCRIBE Redis has confirmed: Redis counts this node among their listeners. */
  readonly #subscribed = new Set<string>();
  /** Channels this node listens on, confirmed or not (one asked for while Redis was away is not yet). */
  readonly #wanted = new Set<string>();

  private constructor(
    private readonly prefix: string,
    private readonly publisher: Redis,
    private readonly subscriber: Redis,
    onError: (error: Error) => void,
  ) {
    // Every `ready` after the first follows a lost connection. ioredis resubscribes after `ready`;
    // subscribing here too (harmless) tells when the node listens again, which is when what it
    // may have missed is dropped.
    subscriber.on("ready", () => {
      const wanted = [...this.#wanted];
      (wanted.length > 0
        ? subscriber.subscribe(...wanted.map((channel) => prefix + channel))
        : Promise.resolve()
      ).then(() => {
        for (const channel of wanted) this.#subscribed.add(channel);
        this.#runReconnectListeners();
      }, onError);
    });
    subscriber.on("message", (channel: string, raw: string) => {
      const { origin, message } = JSON.parse(raw) as { origin: string; message: string };
      if (origin === this.#nodeId) return;
      this.#handlers.run(channel.slice(prefix.length), message).catch(onError);
    });
  }

  /** Channels are named `prefix + channel`, so deployments that share one Redis do not hear each other. */
  static async connect(
    url: string,
    prefix: string,
    onError: (error: Error) => void,
    readyTimeoutMs = REDIS_START_TIMEOUT_MS,
  ): Promise<RedisBus> {
    const publisher = await connectRedis(url, onError, { maxRetriesPerRequest: 3 }, readyTimeoutMs);
    const subscriber = await connectRedis(
      url,
      onError,
      { connectionName: `${prefix}bus` },
      readyTimeoutMs,
    ).catch((error: unknown) => {
      publisher.disconnect();
      throw error;
    });
    const bus = new RedisBus(prefix, publisher, subscriber, onError);
    await bus.subscribe(DROP_CACHES_CHANNEL, () => bus.#runReconnectListeners());
    return bus;
  }

  #runReconnectListeners(): void {
    for (const listener of this.#reconnectListeners) listener();
  }

  async dropCaches(): Promise<void> {
    await this.publish(DROP_CACHES_CHANNEL, "");
  }

  async publish(channel: string, message: string): Promise<number> {
    await this.#handlers.run(channel, message);
    // Not queued for a reconnect that may take long: the caller learns at once that nobody heard.
    if (this.publisher.status !== "ready") throw new BusUnavailableError(this.publisher.status);
    const reached = await this.publisher
      .publish(this.prefix + channel, JSON.stringify({ origin: this.#nodeId, message }))
      .catch((error: unknown) => {
        throw new BusUnavailableError(error);
      });
    // Redis counts this node's own subscription too (unless it is reconnecting); its handlers have
    // already run above.
    return Math.max(0, this.#subscribed.has(channel) ? reached - 1 : reached);
  }

  async subscribe(channel: string, handler: BusHandler): Promise<void> {
    if (!this.#handlers.add(channel, handler)) return;
    this.#wanted.add(channel);
    // Asked for while Redis is away: subscribed when it is back (the `ready` handler above).
    if (this.subscriber.status !== "ready") throw new BusUnavailableError(this.subscriber.status);
    await this.subscriber.subscribe(this.prefix + channel).catch((error: unknown) => {
      throw new BusUnavailableError(error);
    });
    this.#subscribed.add(channel);
  }

  onReconnect(listener: () => void): void {
    this.#reconnectListeners.push(listener);
  }

  async close(): Promise<void> {
    this.subscriber.disconnect();
    await this.publisher.quit().catch(() => this.publisher.disconnect());
  }
}
