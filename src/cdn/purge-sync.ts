import { AcknowledgedChannel } from "../acknowledgements.ts";
import type { Bus } from "../bus.ts";

/** Bus channel: purge these paths of this distribution from every edge cache (acknowledged on `.ack`). */
export const PURGE_CHANNEL = "cdn.purge";

export interface PurgeMessage {
  distributionId: string;
  paths: string[];
}

const ACK_TIMEOUT_MS = 2000;

/**
 * Makes a purge complete on every edge node before it is answered. Only edge nodes listen on the purge
 * channel, so the publish tells how many other edge nodes were sent the purge (none without Redis: the
 * bus runs this node's handler inside `publish`). The purging node waits for each one's
 * acknowledgement, at most two seconds: a node that cannot answer in time must not hold purges up.
 */
export class PurgeSync {
  readonly #channel: AcknowledgedChannel<PurgeMessage>;

  constructor(bus: Bus) {
    this.#channel = new AcknowledgedChannel(bus, PURGE_CHANNEL, ACK_TIMEOUT_MS, "purgeId");
  }

  /** Publishes the purge and returns once every edge node has applied it (or after 2 s). */
  purge(distributionId: string, paths: string[]): Promise<void> {
    return this.#channel.send({ distributionId, paths });
  }

  /** An edge node's side: apply purges as they arrive and acknowledge them. */
  serveEdge(apply: (message: PurgeMessage) => void): Promise<void> {
    return this.#channel.serve(apply);
  }
}
