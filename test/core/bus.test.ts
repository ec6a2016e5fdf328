import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { type Bus, connectRedis, LocalBus, RedisBus } from "../../src/bus.ts";
import { startTcpRelay } from "../support/tcp-relay.ts";
import { waitUntil } from "../support/wait.ts";

const redisUrl = process.env.TEST_REDIS_URL ?? "";
const failOnError = (error: Error) => {
  throw error;
};

/** Subscribes and returns the list that the channel's messages are appended to. */
async function collect(bus: Bus, channel: string): Promise<string[]> {
  const messages: string[] = [];
  await bus.subscribe(channel, (message) => {
    messages.push(message);
  });
  return messages;
}

async function settle(done: () => boolean): Promise<void> {
  for (let wait = 0; !done() && wait < 200; wait++) await new Promise((resolve) => setTimeout(resolve, 10));
}

describe("local bus", () => {
  it("runs this node's handlers inside publish and reaches no other node", async () => {
    const bus = new LocalBus();
    const seen = await collect(bus, "news");
    expect(await bus.publish("news", "hello")).toBe(0);
    expect(seen).toEqual(["hello"]);
  });
});

describe.runIf(redisUrl)("Redis bus", () => {
  const prefix = () => `cumulo-test-bus-${Math.random().toString(36).slice(2)}:`;

  it("hears a message published right after subscribing on a fresh connection", async () => {
    // A subscription sent before ioredis's ready check had finished was lost on the reconnect that
    // followed; each round opens fresh connections and subscribes at once.
    for (let round = 0; round < 20; round++) {
      const namespace = prefix();
      const [listener, speaker] = await Promise.all([
        RedisBus.connect(redisUrl, namespace, failOnError),
        RedisBus.connect(redisUrl, namespace, failOnError),
      ]);
      try {
        const heard = await collect(listener, "purge");
        expect(await speaker.publish("purge", `round ${round}`)).toBe(1);
        await settle(() => heard.length > 0);
        expect(heard).toEqual([`round ${round}`]);
      } finally {
        await Promise.all([listener.close(), speaker.close()]);
      }
    }
  });

  it("counts the other nodes listening, runs its own handlers once, and keeps prefixes apart", async () => {
    const namespace = prefix();
    const [self, other, stranger] = await Promise.all([
      RedisBus.connect(redisUrl, namespace, failOnError),
      RedisBus.connect(redisUrl, namespace, failOnError),
      RedisBus.connect(redisUrl, prefix(), failOnError),
    ]);
    try {
      const own = await collect(self, "news");
      const otherHeard = await collect(other, "news");
      const strangerHeard = await collect(stranger, "news");

      expect(await self.publish("news", "hello")).toBe(1);
      await settle(() => otherHeard.length > 0);
      await self.publish("news", "marker");
      await settle(() => otherHeard.length > 1);
      expect(otherHeard).toEqual(["hello", "marker"]);
      expect(own).toEqual(["hello", "marker"]);
      expect(strangerHeard).toEqual([]);
    } finally {
      await Promise.all([self.close(), other.close(), stranger.close()]);
    }
  });

  it("tells when it listens again after losing its connection, and hears messages from then on", async () => {
    const namespace = prefix();
    const [listener, speaker] = await Promise.all([
      RedisBus.connect(redisUrl, namespace, () => undefined),
      RedisBus.connect(redisUrl, namespace, failOnError),
    ]);
    const admin = new Redis(redisUrl);
    try {
      const heard = await collect(listener, "news");
      let reconnects = 0;
      listener.onReconnect(() => {
        reconnects++;
      });
      // Cut the listener's subscriber connection, found by its name.
      const clients = String(await admin.call("CLIENT", "LIST"));
      const ids = clients
        .split("\n")
        .filter((line) => line.includes(`name=${namespace}bus `))
        .map((line) => /\bid=(\d+)/.exec(line)?.[1]);
      expect(ids).toHaveLength(2); // the listener's and the speaker's
      await admin.call("CLIENT", "KILL", "ID", String(ids[0]));
      await admin.call("CLIENT", "KILL", "ID", String(ids[1]));
      await settle(() => reconnects > 0);
      expect(reconnects).toBe(1);
      expect(await speaker.publish("news", "after")).toBe(1);
      await settle(() => heard.length > 0);
      expect(heard).toEqual(["after"]);
    } finally {
      admin.disconnect();
      await Promise.all([listener.close(), speaker.close()]);
    }
  });

  it("reports the first error of each outage, not every failed reconnect", async () => {
    const url = new URL(redisUrl);
    const relay = await startTcpRelay(url.hostname, Number(url.port || 6379));
    url.hostname = "127.0.0.1";
    url.port = String(relay.port);
    const errors: Error[] = [];
    const client = await connectRedis(url.toString(), (error) => errors.push(error), {}, 5000);
    try {
      for (const outage of [1, 2]) {
        await relay.cut();
        // ioredis tries again every 50 ms at first, then less often: many tries in 1.5 s.
        await new Promise((resolve) => setTimeout(resolve, 1500));
        expect(errors).toHaveLength(outage);
        await relay.restore();
        await waitUntil(async () => client.status === "ready", 10_000, "Redis back");
      }
    } finally {
      client.disconnect();
      await relay.close();
    }
  });

  it("refuses to start when Redis does not answer", async () => {
    // Waiting 1 s rather than a node's default 10 s (CUMULO_REDIS_START_TIMEOUT_MS).
    await expect(RedisBus.connect("redis://127.0.0.1:1", prefix(), () => undefined, 1000)).rejects.toThrow(
      "Redis (REDIS_URL) did not answer within 1 s",
    );
  });
});
