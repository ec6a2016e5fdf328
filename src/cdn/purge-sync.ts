import { randomUUID } from "node:crypto";
import { Acknowledgements } from "../acknowledgements.ts";
import type { Bus } from "../bus.ts";

/** Bus channel: purge these paths of this distribution from every edge cache. */
export const PURGE_CHANNEL = "cdn.purge";
/** Bus channel: an edge node has applied a purge. */
export const PURGE_ACK_CHANNEL = "cdn.purge.ack";

export interface PurgeMessage {
  distributionId: string;
  paths: string[];
  purgeId: string;
}

interface PurgeAck {
  purgeId: string;
  nodeId: string;
}

const ACK_TIMEOUT_MS = 2000;

/**
 * Makes a purge complete on every edge node before it is answered. Only edge nodes listen on the purge
 * channel, so the publish tells how many other edge nodes were sent the purge (none without Redis: the
 * bus runs this node's handler inside `publish`). The purging node waits for each one's
 * acknowledgement, at most two seconds: a node that cannot answer in time must not hold purges up.
 */
export class PurgeSync {
  readonly #acknowledgements = new Acknowledgements(ACK_TIMEOUT_MS);
  #acksSubscribed: Promise<void> | undefined;
  /** This node's own edge, whose purge runs inside `publish` and is not counted among the others. */
  #edgeNodeId: string | undefined;

  constructor(private readonly bus: Bus) {}

  #listenForAcks(): Promise<void> {
    this.#acksSubscribed ??= this.bus
      .subscribe(PURGE_ACK_CHANNEL, (raw) => {
        const ack = JSON.parse(raw) as PurgeAck;
        if (ack.nodeId !== this.#edgeNodeId) this.#acknowledgements.heard(ack.purgeId, ack.nodeId);
      })
      .catch((error: unknown) => {
        // Redis was away: the bus subscribes once it is back, and the next purge asks again.
        this.#acksSubscribed = undefined;
        throw error;
      });
    return this.#acksSubscribed;
  }

  /** Publishes the purge and returns once every edge node has applied it (or after 2 s). */
  async purge(distributionId: string, paths: string[]): Promise<void> {
    await this.#listenForAcks();
    await this.#acknowledgements.announce((purgeId) =>
      this.bus.publish(
        PURGE_CHANNEL,
        JSON.stringify({ distributionId, paths, purgeId } satisfies PurgeMessage),
      ),
    );
  }

  /** An edge node's side: apply purges as they arrive and acknowledge them. */
  async serveEdge(apply: (message: PurgeMessage) => void): Promise<void> {
    const nodeId = randomUUID();
    this.#edgeNodeId = nodeId;
    await this.bus.subscribe(PURGE_CHANNEL, async (raw) => {
      const message = JSON.parse(raw) as PurgeMessage;
      apply(message);
      await this.bus.publish(
        PURGE_ACK_CHANNEL,
        JSON.stringify({ purgeId: message.purgeId, nodeId } satisfies PurgeAck),
      );
    });
  }
}
