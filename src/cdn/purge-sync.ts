import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import type { Bus } from "../bus.ts";

/** Bus channel: purge these paths of this distribution from every edge cache. */
export const PURGE_CHANNEL = "cdn.purge";
/** Bus channel: an edge node has applied a purge. */
export const PURGE_ACK_CHANNEL = "cdn.purge.ack";

export interface PurgeMessage {
  distributionId: string;
  paths: string[];
  /** Set when the purging node waits for acknowledgements. */
  purgeId?: string;
}

interface PurgeAck {
  /** The purge acknowledged; absent when the node is leaving (it will acknowledge nothing more). */
  purgeId?: string;
  nodeId: string;
}

const EDGES_KEY = "cumulo:cdn:edges";
const HEARTBEAT_MS = 2000;
/** An edge that has not renewed its registration for this long is not waited for. */
const LIVE_WITHIN_MS = 3 * HEARTBEAT_MS;
const ACK_TIMEOUT_MS = 2000;

/**
 * Makes a purge complete on every edge node before it is answered. Without Redis there is one node
 * and the bus runs its handler inside `publish`. With Redis, edge nodes register themselves (a
 * sorted set scored by their last heartbeat) and acknowledge each purge on the bus; the purging node
 * waits for every live edge's acknowledgement, at most two seconds (a node that cannot answer in
 * time is not allowed to hold purges up).
 */
export class PurgeSync {
  readonly #waiters = new Map<string, { pending: Set<string>; done: () => void }>();
  #acksSubscribed: Promise<void> | undefined;

  constructor(
    private readonly bus: Bus,
    private readonly redis: Redis | undefined,
  ) {}

  #listenForAcks(): Promise<void> {
    this.#acksSubscribed ??= this.bus.subscribe(PURGE_ACK_CHANNEL, (raw) => {
      const ack = JSON.parse(raw) as PurgeAck;
      const waiters =
        ack.purgeId === undefined ? [...this.#waiters.values()] : [this.#waiters.get(ack.purgeId)];
      for (const waiter of waiters) {
        if (!waiter) continue;
        waiter.pending.delete(ack.nodeId);
        if (waiter.pending.size === 0) waiter.done();
      }
    });
    return this.#acksSubscribed;
  }

  /** Publishes the purge and returns once every live edge node has applied it (or after 2 s). */
  async purge(distributionId: string, paths: string[]): Promise<void> {
    if (!this.redis) {
      await this.bus.publish(PURGE_CHANNEL, JSON.stringify({ distributionId, paths } satisfies PurgeMessage));
      return;
    }
    await this.#listenForAcks();
    const live = await this.redis
      .zrangebyscore(EDGES_KEY, Date.now() - LIVE_WITHIN_MS, "+inf")
      .catch(() => [] as string[]);
    const purgeId = randomUUID();
    let timer: NodeJS.Timeout | undefined;
    const acknowledged = new Promise<void>((resolve) => {
      this.#waiters.set(purgeId, { pending: new Set(live), done: resolve });
      timer = setTimeout(resolve, ACK_TIMEOUT_MS);
      if (live.length === 0) resolve();
    });
    try {
      await this.bus.publish(
        PURGE_CHANNEL,
        JSON.stringify({ distributionId, paths, purgeId } satisfies PurgeMessage),
      );
      await acknowledged;
    } finally {
      clearTimeout(timer);
      this.#waiters.delete(purgeId);
    }
  }

  /** An edge node's side: apply purges as they arrive and acknowledge them; stays registered while running. */
  async serveEdge(apply: (message: PurgeMessage) => void): Promise<{ stop(): Promise<void> }> {
    const nodeId = randomUUID();
    await this.bus.subscribe(PURGE_CHANNEL, async (raw) => {
      const message = JSON.parse(raw) as PurgeMessage;
      apply(message);
      if (message.purgeId && this.redis) {
        await this.bus.publish(
          PURGE_ACK_CHANNEL,
          JSON.stringify({ purgeId: message.purgeId, nodeId } satisfies PurgeAck),
        );
      }
    });
    if (!this.redis) return { stop: async () => undefined };
    const redis = this.redis;
    const heartbeat = async () => {
      await redis.zadd(EDGES_KEY, Date.now(), nodeId);
      await redis.zremrangebyscore(EDGES_KEY, "-inf", Date.now() - 10 * LIVE_WITHIN_MS);
    };
    await heartbeat().catch(() => undefined);
    const timer = setInterval(() => void heartbeat().catch(() => undefined), HEARTBEAT_MS);
    timer.unref();
    return {
      stop: async () => {
        clearInterval(timer);
        await redis.zrem(EDGES_KEY, nodeId).catch(() => undefined);
        // Purges waiting for this node need not wait any longer.
        await this.bus
          .publish(PURGE_ACK_CHANNEL, JSON.stringify({ nodeId } satisfies PurgeAck))
          .catch(() => undefined);
      },
    };
  }
}
