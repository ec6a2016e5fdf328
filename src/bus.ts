import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";

export type BusHandler = (message: string) => void | Promise<void>;

/**
 * Notifications every node must see (cache purges, key revocations). `publish` runs this node's
 * handlers before it returns, then reaches the other nodes through Redis when configured.
 */
export interface Bus {
  publish(channel: string, message: string): Promise<void>;
  subscribe(channel: string, handler: BusHandler): Promise<void>;
  close(): Promise<void>;
}

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

  async publish(channel: string, message: string): Promise<void> {
    await this.#handlers.run(channel, message);
  }

  async subscribe(channel: string, handler: BusHandler): Promise<void> {
    this.#handlers.add(channel, handler);
  }

  async close(): Promise<void> {}
}

const CHANNEL_PREFIX = "cumulo:";

export class RedisBus implements Bus {
  readonly #nodeId = randomUUID();
  readonly #handlers = new LocalHandlers();
  readonly #publisher: Redis;
  readonly #subscriber: Redis;

  constructor(redisUrl: string, onError: (error: Error) => void) {
    this.#publisher = new Redis(redisUrl, { lazyConnect: false, maxRetriesPerRequest: 3 });
    this.#subscriber = new Redis(redisUrl, { lazyConnect: false });
    this.#publisher.on("error", onError);
    this.#subscriber.on("error", onError);
    this.#subscriber.on("message", (channel: string, raw: string) => {
      const { origin, message } = JSON.parse(raw) as { origin: string; message: string };
      if (origin === this.#nodeId) return;
      this.#handlers.run(channel.slice(CHANNEL_PREFIX.length), message).catch(onError);
    });
  }

  async publish(channel: string, message: string): Promise<void> {
    await this.#handlers.run(channel, message);
    await this.#publisher.publish(
      CHANNEL_PREFIX + channel,
      JSON.stringify({ origin: this.#nodeId, message }),
    );
  }

  async subscribe(channel: string, handler: BusHandler): Promise<void> {
    if (this.#handlers.add(channel, handler)) await this.#subscriber.subscribe(CHANNEL_PREFIX + channel);
  }

  async close(): Promise<void> {
    this.#subscriber.disconnect();
    await this.#publisher.quit().catch(() => this.#publisher.disconnect());
  }
}
