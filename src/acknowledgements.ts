import { randomUUID } from "node:crypto";
import { type Bus, unlessBusUnavailable } from "./bus.ts";

/**
 * The other nodes' word that they acted on an announcement (a purge, a key change), waited for by the
 * node that made it before it answers: each node is counted once, and the wait ends after `timeoutMs`
 * at most, since a node that cannot answer in time must not hold the announcer up.
 */
export class Acknowledgements {
  readonly #waiters = new Map<string, (node: string) => void>();

  constructor(private readonly timeoutMs: number) {}

  /** `node` says it acted on announcement `id` (ignored unless this node is waiting for it). */
  heard(id: string, node: string): void {
    this.#waiters.get(id)?.(node);
  }

  /** Whether `id` is this node's own announcement, still being waited for. */
  awaits(id: string): boolean {
    return this.#waiters.has(id);
  }

  /**
   * Makes an announcement under a new id (`announce` resolves to how many other nodes were sent it)
   * and resolves once that many have acknowledged it, or after the timeout.
   */
  async announce(announce: (id: string) => Promise<number>): Promise<void> {
    const id = randomUUID();
    const acknowledged = new Set<string>();
    let expected = Number.POSITIVE_INFINITY;
    let finish = () => {};
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    // Acknowledgements can arrive before the announcement has told how many to expect.
    this.#waiters.set(id, (node) => {
      acknowledged.add(node);
      if (acknowledged.size >= expected) finish();
    });
    const timer = setTimeout(finish, this.timeoutMs);
    try {
      expected = await announce(id);
      if (acknowledged.size >= expected) finish();
      await finished;
    } finally {
      clearTimeout(timer);
      this.#waiters.delete(id);
    }
  }
}

/**
 * A bus channel whose sender waits for its message to be acted on: every node serving the channel
 * acts, then says so on `<channel>.ack`, and `send` resolves once each node that was sent the message
 * has (or after `timeoutMs`). Without Redis the bus runs this node's action inside `publish`, and there
 * is no one else to wait for.
 */
export class AcknowledgedChannel<T extends object> {
  readonly #acknowledgements: Acknowledgements;
  #acksSubscribed: Promise<void> | undefined;
  /** This node's own server, whose action runs inside `publish` and is not counted among the others. */
  #servingNodeId: string | undefined;

  /**
   * `idField` names the announcement's id in the message and in its acknowledgements (`{[idField],
   * nodeId}`): a channel keeps the words its nodes of an earlier version send and read.
   */
  constructor(
    private readonly bus: Bus,
    private readonly channel: string,
    timeoutMs: number,
    private readonly idField = "id",
  ) {
    this.#acknowledgements = new Acknowledgements(timeoutMs);
  }

  get #ackChannel(): string {
    return `${this.channel}.ack`;
  }

  #listenForAcks(): Promise<void> {
    this.#acksSubscribed ??= this.bus
      .subscribe(this.#ackChannel, (raw) => {
        const ack = JSON.parse(raw) as Record<string, string>;
        if (ack.nodeId !== this.#servingNodeId) this.#acknowledgements.heard(ack[this.idField], ack.nodeId);
      })
      .catch((error: unknown) => {
        // Redis was away: the bus subscribes once it is back, and the next message asks again.
        this.#acksSubscribed = undefined;
        throw error;
      });
    return this.#acksSubscribed;
  }

  /**
   * Publishes `message` and resolves once every node serving the channel has acted on it. With Redis
   * away this node still acts, then `BusUnavailableError` says the others did not hear it.
   */
  async send(message: T): Promise<void> {
    await this.#listenForAcks().catch(unlessBusUnavailable);
    await this.#acknowledgements.announce((id) =>
      this.bus.publish(this.channel, JSON.stringify({ ...message, [this.idField]: id })),
    );
  }

  /** A serving node's side: act on each message as it arrives, then acknowledge it. */
  async serve(act: (message: T) => void | Promise<void>): Promise<void> {
    const nodeId = randomUUID();
    this.#servingNodeId = nodeId;
    await this.bus.subscribe(this.channel, async (raw) => {
      const message = JSON.parse(raw) as T & Record<string, unknown>;
      await act(message);
      await this.bus.publish(
        this.#ackChannel,
        JSON.stringify({ [this.idField]: message[this.idField], nodeId }),
      );
    });
  }
}
